"""`/lg` time travel, driven by the real `langgraph-sdk`: a run or a state update from an older
checkpoint starts a branch. The new turn goes on from that checkpoint (the model reads that
branch only), history lists both branches with their parents, the original branch is kept."""

from __future__ import annotations

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
        assert len(history) == 3
        branch = history[0]
        assert branch["parent_checkpoint"]["checkpoint_id"] == first_id
        assert by_id[original]["parent_checkpoint"]["checkpoint_id"] == first_id  # the original is kept
        assert [m["content"] for m in by_id[original]["values"]["messages"]] == ["First?", "One.", "Second?", "Two."]
        assert branch["metadata"]["step"] == by_id[original]["metadata"]["step"] == 1
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
        assert len(history) == 4 and history[0]["parent_checkpoint"]["checkpoint_id"] == update_id
        with pytest.raises(NotFoundError):
            await client.threads.update_state("t-fork-update", {"messages": [{"type": "human", "content": "x"}]},
                                              checkpoint_id="no-such-checkpoint")
