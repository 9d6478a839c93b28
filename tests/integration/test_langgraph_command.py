"""A run's `command` beyond `resume`, driven by the real `langgraph-sdk`: `update` adds messages
to the thread as update_state does, before the run's question (the input's, or the update's last
human message); `goto: "__end__"` adds them and calls no model; `goto` to the answer node runs it;
everything else is a 422 naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.errors import ConflictError, UnprocessableEntityError

from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.integration.test_callbacks import Receiver
from tests.integration.test_callbacks_runs import allowing, delivered, verified
from tests.integration.test_langgraph_api import HALF, ask, collect, lg, messages_of, until_streaming
from tests.support import openai_server as oai


def _said(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["type"], m["content"]) for m in values["messages"]]


async def test_an_update_without_input_is_answered_after_its_earlier_messages(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("Stockholm.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-cmd-update")
        parts = await collect(client.runs.stream("t-cmd-update", "chat-direct", command={"update": {"messages": [
            {"type": "human", "content": "Capital of Norway?"}, {"type": "ai", "content": "Oslo."},
            {"role": "user", "content": "And of Sweden?"}]}}, stream_mode=["values"]))
        assert parts[0].event == "metadata" and parts[-1].event == "end"
        run_id = parts[0].data["run_id"]
        values = [p.data for p in parts if p.event == "values"]
        assert _said(values[0]) == [("human", "Capital of Norway?"), ("ai", "Oslo."), ("human", "And of Sweden?")]
        assert _said(values[-1])[-1] == ("ai", "Stockholm.")
        said = [m["content"] for m in srv.requests()[0]["body"]["messages"]]
        assert said[-3:] == ["Capital of Norway?", "Oslo.", "And of Sweden?"]  # the model read the update first
        assert (await client.runs.get("t-cmd-update", run_id))["status"] == "success"

        state = await client.threads.get_state("t-cmd-update")
        assert _said(state["values"]) == [("human", "Capital of Norway?"), ("ai", "Oslo."),
                                          ("human", "And of Sweden?"), ("ai", "Stockholm.")]
        history = await client.threads.get_history("t-cmd-update")
        # The update's turn (its last message is the run's question, not a message of the update's own).
        # Newest first: the run's answer, its question, the update's turn, the thread's start.
        assert [len(s["values"]["messages"]) for s in history] == [4, 3, 2, 0]
        assert history[0]["checkpoint"]["checkpoint_id"] == run_id
        assert history[2]["metadata"]["source"] == "update"
        assert [s["parent_checkpoint"] and s["parent_checkpoint"]["checkpoint_id"] for s in history] == [
            *[s["checkpoint"]["checkpoint_id"] for s in history[1:]], None]

        # One human message alone: the run's question, and no update turn at all.
        srv.script([oai.reply("Copenhagen.")])
        answered = await client.runs.wait("t-cmd-update", "chat-direct", command={
            "update": {"messages": [{"type": "human", "content": "And of Denmark?"}]}, "goto": "ans"})
        assert _said(answered)[-2:] == [("human", "And of Denmark?"), ("ai", "Copenhagen.")]
        assert len(await client.threads.get_history("t-cmd-update")) == 6  # one more question and its answer


async def test_an_update_with_input_comes_first_in_the_thread(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply("Bergen, by rain."), oai.reply("Oslo."), oai.hang(HALF, seconds=600)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-cmd-input")
        answered = await client.runs.wait("t-cmd-input", "chat-direct", input=ask("Which city is wettest?"),
                                          command={"update": {"messages": [
                                              {"type": "human", "content": "Talk about Norway."},
                                              {"type": "ai", "content": "Gladly."}]}})
        assert _said(answered) == [("human", "Talk about Norway."), ("ai", "Gladly."),
                                   ("human", "Which city is wettest?"), ("ai", "Bergen, by rain.")]
        said = [m["content"] for m in srv.requests()[0]["body"]["messages"]]
        assert said[-3:] == ["Talk about Norway.", "Gladly.", "Which city is wettest?"]
        # LangGraph's other form of an update: a list of (key, value) pairs.
        answered = await client.runs.wait("t-cmd-input", "chat-direct", input=ask("And its capital?"),
                                          command={"update": [("messages", [{"type": "ai", "content": "Noted."}])],
                                                   "goto": "ans"})
        assert _said(answered)[4:] == [("ai", "Noted."), ("human", "And its capital?"), ("ai", "Oslo.")]
        # Each run: its answer and its question, after its update's turn (the thread's start last).
        assert [len(s["values"]["messages"]) for s in await client.threads.get_history("t-cmd-input")] == [
            7, 6, 5, 4, 3, 2, 0]

        # While a run goes, an update is refused as update_state is, whatever the multitask strategy.
        going = await client.runs.create("t-cmd-input", "chat-direct", input=ask("Tell me everything."))
        await until_streaming(client, "t-cmd-input", going["run_id"])
        late: dict[str, Any] = {"update": {"messages": [{"type": "ai", "content": "Late."}]}}
        with pytest.raises(ConflictError):
            await client.runs.create("t-cmd-input", "chat-direct", input=ask("Now?"), multitask_strategy="interrupt",
                                     command=late)
        with pytest.raises(ConflictError):
            await client.runs.create("t-cmd-input", "chat-direct", command={**late, "goto": "__end__"})
        await client.runs.cancel("t-cmd-input", going["run_id"], wait=True)
        assert "Late." not in [content for _, content in await messages_of(client, "t-cmd-input")]


async def test_goto_end_adds_the_update_and_calls_no_model(scripted: Settings, srv: oai.OpenAIServer) -> None:
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-cmd-end")
        parts = await collect(client.runs.stream("t-cmd-end", "chat-direct", command={"goto": "__end__", "update": {
            "messages": [{"type": "human", "content": "Remember: I live in Oslo."}]}}))
        assert {p.event for p in parts} == {"metadata", "values", "end"}, parts
        assert parts[0].event == "metadata" and parts[-1].event == "end"
        run_id = parts[0].data["run_id"]
        assert _said(parts[-2].data) == [("human", "Remember: I live in Oslo.")]
        waited = await client.runs.wait("t-cmd-end", "chat-react", metadata={"by": "test"}, command={
            "goto": "__end__", "update": {"messages": [{"type": "ai", "content": "Noted."}]}})
        assert _said(waited) == [("human", "Remember: I live in Oslo."), ("ai", "Noted.")]
        assert srv.requests() == []  # no model was called
        for run in await client.runs.list("t-cmd-end"):
            assert run["status"] == "success"
        latest = (await client.runs.list("t-cmd-end"))[0]
        assert latest["assistant_id"] == "chat-react" and latest["metadata"]["by"] == "test"
        assert (await client.runs.get("t-cmd-end", run_id))["status"] == "success"
        state = await client.threads.get_state("t-cmd-end")
        assert _said(state["values"]) == [("human", "Remember: I live in Oslo."), ("ai", "Noted.")]
        assert state["metadata"]["source"] == "update" and state["next"] == []
        # Its stream can be joined again, as any run's.
        joined = await collect(client.runs.join_stream("t-cmd-end", run_id))
        assert joined[-1].event == "end" and _said(joined[-2].data) == [("human", "Remember: I live in Oslo.")]
        # With no update, the run adds nothing and ends.
        made = await client.runs.create("t-cmd-end", "chat-direct", command={"goto": "__end__"})
        assert _said(await client.runs.join("t-cmd-end", made["run_id"])) == _said(state["values"])
        assert (await client.runs.get("t-cmd-end", made["run_id"]))["status"] == "success"
        assert srv.requests() == []


async def test_a_run_that_goes_to_end_calls_its_webhook(settings: Settings) -> None:
    async with Receiver([]) as rx, chat_stack(allowing(settings), with_dispatcher=False) as stack:
        client = lg(stack, "cb-end")
        native = await stack.client("cb-end")
        await client.threads.create(thread_id="t-cmd-hook")
        made = await client.runs.create("t-cmd-hook", "chat-direct", webhook=rx.url, command={
            "goto": "__end__", "update": {"messages": [{"type": "human", "content": "Noted?"}]}})
        (row,) = await delivered(native, made["run_id"])
        sent = verified((await native.get("/api/v1/callbacks/secret")).json()["secret"], rx, row["id"])
        assert sent["run_id"] == made["run_id"] and sent["status"] == "success"
        assert _said(sent["values"]) == [("human", "Noted?")]


HUMAN = {"type": "human", "content": "hi"}
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"command": {"update": {"messages": [HUMAN, {"type": "ai", "content": "yo"}]}}}, "command.update"),
    ({"command": {"update": {"messages": [HUMAN], "todos": []}}}, "command.update.todos"),
    ({"command": {"update": [("todos", [])]}}, "command.update.todos"),
    ({"command": {"update": ["messages"]}}, "command.update"),
    ({"command": {"update": {"messages": [{"type": "system", "content": "x"}]}}}, "command.update.messages"),
    ({"command": {"update": {"messages": []}}}, "command.update"),
    ({"command": {"update": {"messages": [{**HUMAN, "id": 5}]}}}, "command.update.messages"),
    ({"command": {"update": {"messages": [HUMAN]}, "goto": ["ans"]}}, "command.goto"),
    ({"command": {"update": {"messages": [HUMAN]}, "goto": {"node": "ans", "input": {}}}}, "command.goto"),
    ({"command": {"update": {"messages": [HUMAN]}, "goto": "plan"}}, "command.goto"),
    ({"command": {"resume": "approve", "update": {"messages": [HUMAN]}}}, "command.update"),
    ({"command": {"resume": "approve", "goto": "ans"}}, "command.goto"),
    ({"command": {"goto": "__end__"}, "input": ask("hi")}, "input"),
    ({"command": {"graph": "parent"}}, "command.graph"),
]


async def test_every_other_command_is_refused_by_name(settings: Settings) -> None:
    async with chat_stack(settings, with_dispatcher=False) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-cmd-refused")
        for body, field in REFUSED:
            with pytest.raises(UnprocessableEntityError) as refused:
                await client.runs.create("t-cmd-refused", "chat-direct", **body)
            problem: Any = refused.value.body
            assert [e["field"] for e in problem["errors"]] == [field], (body, problem)
        assert (await client.threads.get_state("t-cmd-refused"))["values"] == {"messages": []}  # nothing written
