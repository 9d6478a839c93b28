"""`/lg` time travel, driven by the real `langgraph-sdk`: a run or a state update from an older
checkpoint starts a branch. The new turn goes on from that checkpoint (the model reads that
branch only), history lists both branches with their parents, the original branch is kept."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.errors import NotFoundError

from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.integration.test_langgraph_api import ask, lg
from tests.support import openai_server as oai


async def test_a_run_from_an_older_checkpoint_branches_and_keeps_the_original(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("One."), oai.reply("Two."), oai.reply("Deux."), oai.reply("Trois.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-fork")
        first = await client.runs.wait("t-fork", "chat-direct", input=ask("First?"))
        assert [m["content"] for m in first["messages"]] == ["First?", "One."]
        states = await client.threads.get_history("t-fork")
        first_id = states[0]["checkpoint"]["checkpoint_id"]
        await client.runs.wait("t-fork", "chat-direct", input=ask("Second?"))
        original = (await client.threads.get_history("t-fork"))[0]["checkpoint"]["checkpoint_id"]

        # Edit "Second?": a run from the checkpoint before it (as agent-chat-ui's edit sends it).
        forked = await client.runs.wait("t-fork", "chat-direct", input=ask("Deuxième?"),
                                        checkpoint={"checkpoint_id": first_id, "checkpoint_ns": ""})
        assert [m["content"] for m in forked["messages"]] == ["First?", "One.", "Deuxième?", "Deux."]
        said = [m["content"] for m in srv.requests()[2]["body"]["messages"]]
        assert "Second?" not in said and "Two." not in said and said[-1] == "Deuxième?"

        history = await client.threads.get_history("t-fork")
        by_id = {s["checkpoint"]["checkpoint_id"]: s for s in history}
        assert len(history) == 7  # the thread's start, then each turn's question and the turn's own

        def asked_at(state_id: str) -> dict[str, Any]:
            question = by_id[by_id[state_id]["parent_checkpoint"]["checkpoint_id"]]
            assert question["next"] == ["ans"]
            return question

        branch = history[0]
        assert asked_at(branch["checkpoint"]["checkpoint_id"])["parent_checkpoint"]["checkpoint_id"] == first_id
        assert asked_at(original)["parent_checkpoint"]["checkpoint_id"] == first_id  # the original is kept
        assert [m["content"] for m in asked_at(original)["values"]["messages"]] == ["First?", "One.", "Second?"]
        assert [m["content"] for m in by_id[original]["values"]["messages"]] == ["First?", "One.", "Second?", "Two."]
        assert branch["metadata"]["step"] == by_id[original]["metadata"]["step"] == 3
        state = await client.threads.get_state("t-fork")
        assert state["checkpoint"]["checkpoint_id"] == branch["checkpoint"]["checkpoint_id"]

        # The next turn without a checkpoint goes on from the latest: the branch.
        on = await client.runs.wait("t-fork", "chat-direct", input=ask("Troisième?"))
        assert [m["content"] for m in on["messages"]] == ["First?", "One.", "Deuxième?", "Deux.", "Troisième?",
                                                          "Trois."]
        said = [m["content"] for m in srv.requests()[3]["body"]["messages"]]
        assert "Second?" not in said and "Deuxième?" in said
        native = await stack.client("lg-user")
        missing = await native.post("/lg/threads/t-fork/runs/wait", json={"input": ask("x"), "checkpoint_id": "nope"})
        assert missing.status_code == 404 and "checkpoint 'nope'" in missing.json()["detail"]


async def test_update_state_on_an_older_checkpoint_then_a_run_from_it(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("One."), oai.reply("Two."), oai.reply("Yes, from the edit.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-fork-update")
        await client.runs.wait("t-fork-update", "chat-direct", input=ask("First?"))
        first_id = (await client.threads.get_state("t-fork-update"))["checkpoint"]["checkpoint_id"]
        await client.runs.wait("t-fork-update", "chat-direct", input=ask("Second?"))
        made = await client.threads.update_state("t-fork-update", {"messages": [
            {"type": "human", "content": "Edited second?"}, {"type": "ai", "content": "Edited two."}]},
            checkpoint_id=first_id)
        update_id = made["checkpoint"]["checkpoint_id"]
        state = await client.threads.get_state("t-fork-update", checkpoint_id=update_id)
        assert [m["content"] for m in state["values"]["messages"]] == ["First?", "One.", "Edited second?",
                                                                       "Edited two."]
        assert state["parent_checkpoint"]["checkpoint_id"] == first_id
        answered = await client.runs.wait("t-fork-update", "chat-direct", input=ask("Sure?"),
                                          config={"configurable": {"checkpoint_id": update_id}})
        assert [m["content"] for m in answered["messages"]][-3:] == ["Edited two.", "Sure?", "Yes, from the edit."]
        said = [m["content"] for m in srv.requests()[2]["body"]["messages"]]
        assert "Second?" not in said and "Edited second?" in said
        history = await client.threads.get_history("t-fork-update", limit=10)
        assert len(history) == 8 and history[1]["parent_checkpoint"]["checkpoint_id"] == update_id
        with pytest.raises(NotFoundError):
            await client.threads.update_state("t-fork-update", {"messages": [{"type": "human", "content": "x"}]},
                                              checkpoint_id="no-such-checkpoint")


def _first_seen(history: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
    """The oldest state that has the message, as useStream's `getMessagesMetadata` finds it."""
    return [s for s in history if message_id in [m["id"] for m in s["values"]["messages"]]][-1]


def _shape(history: list[dict[str, Any]]) -> list[tuple[list[str], list[str], int | None]]:
    """Each state's messages, next nodes and its parent's place in the list: a history without its ids."""
    at = {s["checkpoint"]["checkpoint_id"]: n for n, s in enumerate(history)}
    return [([m["content"] for m in s["values"]["messages"]], s["next"],
             at.get((s["parent_checkpoint"] or {}).get("checkpoint_id"))) for s in history]


def _said_to_model(srv: oai.OpenAIServer, call: int) -> list[str]:
    return [m["content"] for m in srv.requests()[call]["body"]["messages"] if m["role"] != "system"]


async def test_a_run_from_a_questions_checkpoint_answers_it_again_beside_the_first(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("One."), oai.reply("Two."), oai.reply("Two, again."), oai.reply("One, again."),
                oai.reply("Uno.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-regen")
        await client.runs.wait("t-regen", "chat-direct", input=ask("First?"))
        second = await client.runs.wait("t-regen", "chat-direct", input={"messages": [
            {"type": "human", "content": "Second?", "id": "q-2"}]})
        answer = second["messages"][-1]

        # Regenerate "Two." as agent-chat-ui does: a run with no input from the parent of the first
        # state that has the answer — the state with its question, before the model answered.
        history = await client.threads.get_history("t-regen")
        asked = _first_seen(history, answer["id"])["parent_checkpoint"]
        question = await client.threads.get_state("t-regen", checkpoint_id=asked["checkpoint_id"])
        assert [m["content"] for m in question["values"]["messages"]] == ["First?", "One.", "Second?"]
        assert question["next"] == ["ans"]
        again = await client.runs.wait("t-regen", "chat-direct", input=None, checkpoint=asked)
        assert (again["messages"][2]["content"], again["messages"][2]["id"]) == ("Second?", "q-2")  # the same message
        assert [m["content"] for m in again["messages"]] == ["First?", "One.", "Second?", "Two, again."]
        assert _said_to_model(srv, 2) == ["First?", "One.", "Second?"]

        # Both answers hang from the question: useStream shows them as two branches of the answer.
        history = await client.threads.get_history("t-regen")
        by_id = {s["checkpoint"]["checkpoint_id"]: s for s in history}
        under = [s for s in history if (s["parent_checkpoint"] or {}).get("checkpoint_id") == asked["checkpoint_id"]]
        assert sorted(s["values"]["messages"][-1]["content"] for s in under) == ["Two, again.", "Two."]
        assert len(history) == 6  # the start, two questions, three answers
        state = await client.threads.get_state("t-regen")
        assert state["values"]["messages"][-1]["content"] == "Two, again."
        assert by_id[state["checkpoint"]["checkpoint_id"]]["metadata"]["step"] == 3

        # The first answer too: the model reads the first question alone.
        first_asked = _first_seen(history, again["messages"][1]["id"])["parent_checkpoint"]
        redone = await client.runs.wait("t-regen", "chat-direct", checkpoint_id=first_asked["checkpoint_id"])
        assert [m["content"] for m in redone["messages"]] == ["First?", "One, again."]
        assert _said_to_model(srv, 3) == ["First?"]

        # Editing the first question: a run from the parent of its first state, the thread's start.
        start = _first_seen(await client.threads.get_history("t-regen"), again["messages"][0]["id"])
        edited = await client.runs.wait("t-regen", "chat-direct", input=ask("Primero?"),
                                        checkpoint=start["parent_checkpoint"])
        assert [m["content"] for m in edited["messages"]] == ["Primero?", "Uno."]
        assert _said_to_model(srv, 4) == ["Primero?"]
        empty = await client.threads.get_state("t-regen", checkpoint_id=start["parent_checkpoint"]["checkpoint_id"])
        assert empty["values"]["messages"] == [] and empty["parent_checkpoint"] is None

        # A copy of the thread has the same checkpoints: its branches, and its answers made again.
        twin = await client.threads.copy("t-regen")
        assert _shape(await client.threads.get_history(twin["thread_id"], limit=50)) == _shape(
            await client.threads.get_history("t-regen", limit=50))

        native = await stack.client("lg-user")
        with_input = await native.post("/lg/threads/t-regen/runs/wait", json={
            "input": ask("Other?"), "checkpoint_id": asked["checkpoint_id"]})
        assert with_input.status_code == 422 and with_input.json()["errors"][0]["field"] == "input"
        updated = await native.post("/lg/threads/t-regen/state", json={
            "values": {"messages": [{"type": "human", "content": "x"}]}, "checkpoint_id": asked["checkpoint_id"]})
        assert updated.status_code == 422 and updated.json()["errors"][0]["field"] == "checkpoint"
        unknown = await native.post("/lg/threads/t-regen/runs/wait", json={"checkpoint_id": "t_nope-question"})
        assert unknown.status_code == 404 and "t_nope-question" in unknown.json()["detail"]
        assert len(srv.requests()) == 5  # nothing refused reached the model
