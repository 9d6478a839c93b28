"""How chat runs of one conversation behave together and how they end: FIFO through two gateway
replicas sharing one database (SQLite and PostgreSQL), messages posted one after the other or all
at once, the `reject` and `interrupt` policies, cancel mid-stream (the partial
answer is kept), failures as clear `error` messages, and the model precedence. A scripted model
server streams slowly where a run must be caught mid-answer."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from shared.bus.tools import ToolContext, ToolRegistry
from shared.settings import Settings
from tests.conftest import make_settings
from tests.integration.chat_support import (
    ENDED,
    WAIT_S,
    Frame,
    chat_stack,
    events_of,
    frames,
    new_conversation,
    run_state,
    say,
    thread,
)
from tests.support import openai_server as oai
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

PARTIAL = "The first half of an answer that never"


@pytest.fixture
def scripted(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer) -> Settings:
    """Settings whose built-in model is the scripted server (one attempt per call)."""
    return make_settings(nats_server.url, tmp_path / "data", llm_base_url=srv.url, llm_model="m",
                         llm_api_key="k", llm_retry_attempts=1)


async def until_token(client: httpx.AsyncClient, run_id: str) -> list[Frame]:
    """The run's events up to its first token: it is answering now."""
    return [f async for f in frames(client, run_id, until="token")]


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def approvable(client: httpx.AsyncClient, run_id: str) -> None:
    """Until the run waits for its approval and its task's record says so too (what the approval
    route checks): with two replicas the recorder can apply a task's events out of order, and its
    record then lags behind the run's state for a moment."""
    await run_state(client, run_id, {"awaiting_approval"})

    async def recorded() -> bool:
        return (await client.get(f"/api/v1/tasks/{run_id}")).json()["status"] == "waiting"

    await eventually(recorded, attempts=int(WAIT_S / 0.05), every_s=0.05)


def ran(events: list[Frame]) -> tuple[datetime, datetime]:
    """When a run's task started running and when it ended, by its own log (the task record's
    times depend on the order the recorder applied its events in)."""
    started = next(f for f in events if f.event == "status" and f.data["status"] == "running")
    return at(started.data["ts"]), at(events[-1].data["ts"])


@pytest.fixture
def shared_db(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """Settings for gateway replicas on one PostgreSQL database: several replicas is the
    production topology, and production's database. (Two replicas sharing one SQLite file, which
    no deployment does, passed these tests but once timed out waiting for a run's recorded state.)"""
    return settings.model_copy(update={"gateway_db_url": request.getfixturevalue("pg_url")})


async def test_three_quick_messages_through_two_replicas_run_one_at_a_time_in_order(shared_db: Settings) -> None:
    async with chat_stack(shared_db, replicas=2) as stack:
        user = "fifo-user"
        one, two = await stack.client(user, replica=0), await stack.client(user, replica=1)
        conversation = await new_conversation(one, mode="direct")
        # The first run plans and waits for approval, so the next two surely queue behind it.
        first = await say(one, conversation, "Step one is planning. What is step one?", mode="plan")
        second = await say(two, conversation, "Step two is doing. What is step two?")
        third = await say(one, conversation, "Step three is checking. What is step three?")
        assert [r["run"]["position"] for r in (first, second, third)] == [0, 1, 2]
        ids = [r["run"]["id"] for r in (first, second, third)]
        assert (await two.get(f"/api/v1/runs/{ids[2]}")).json()["position"] == 2
        await approvable(two, ids[0])
        assert [(await one.get(f"/api/v1/runs/{i}")).json()["state"] for i in ids[1:]] == ["queued", "queued"]
        assert (await one.post(f"/api/v1/runs/{ids[0]}/approval", json={"decision": "approve"})).status_code == 202

        times = []
        for index, run_id in enumerate(ids):
            events = await events_of(two if index % 2 else one, run_id)
            if index:
                assert events[0].event == "queued" and events[0].data["position"] == index
            assert events[-1].data["status"] == "done"
            assert (await run_state(one, run_id, ENDED))["state"] == "succeeded"
            times.append(ran(events))
        for (_, ended), (started, _) in itertools.pairwise(times):
            assert started >= ended  # never two at once
        tasks = [(await one.get(f"/api/v1/tasks/{i}")).json() for i in ids]
        messages = await thread(two, conversation)
        assert [(m["role"], m["run_id"]) for m in messages] == [
            (role, run_id) for run_id in ids for role in ("user", "assistant")]
        # The third run's memory holds both earlier turns, answers included, in order.
        said = [{"role": m["role"], "content": m["content"]} for m in messages[:4]]
        assert tasks[2]["input"]["history"] == said


async def test_three_messages_posted_at_once_through_two_replicas_run_one_at_a_time_in_the_order_accepted(
    shared_db: Settings,
) -> None:
    async with chat_stack(shared_db, replicas=2) as stack:
        user = "fifo-gather-user"
        one, two = await stack.client(user, replica=0), await stack.client(user, replica=1)
        clients = (one, two, one)
        # Every run plans and waits for its approval: the runs behind the first surely queue.
        conversation = await new_conversation(one, mode="plan")
        texts = [f"Step {name} is mine. What is step {name}?" for name in ("alpha", "beta", "gamma")]
        posted = await asyncio.gather(*(say(c, conversation, t) for c, t in zip(clients, texts, strict=True)))
        asked = {p["run"]["id"]: (p["message"]["content"], p["run"]["position"]) for p in posted}
        seqs = {run_id: (await two.get(f"/api/v1/runs/{run_id}")).json()["seq"] for run_id in asked}
        ids = sorted(asked, key=seqs.__getitem__)  # the order the server accepted them in
        assert [seqs[i] for i in ids] == [1, 2, 3] and [asked[i][1] for i in ids] == [0, 1, 2]

        for index, run_id in enumerate(ids):
            client = (one, two)[index % 2]
            await approvable(client, run_id)
            for later in ids[index + 1:]:  # held, with no task yet
                assert (await client.get(f"/api/v1/runs/{later}")).json()["state"] == "queued"
                assert (await client.get(f"/api/v1/tasks/{later}")).status_code == 404
            assert (await client.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})).status_code \
                == 202
            assert (await run_state(client, run_id, ENDED))["state"] == "succeeded"

        times = []
        for index, run_id in enumerate(ids):
            events = await events_of(clients[index], run_id)
            if index:
                assert events[0].event == "queued" and events[0].data["position"] == index
            assert events[-1].data["status"] == "done"
            times.append(ran(events))
        for (_, ended), (started, _) in itertools.pairwise(times):
            assert started >= ended  # never two at once, in seq order
        messages = await thread(two, conversation)
        assert [(m["role"], m["run_id"]) for m in messages] == [
            (role, run_id) for run_id in ids for role in ("user", "assistant")]
        assert [m["content"] for m in messages if m["role"] == "user"] == [asked[i][0] for i in ids]


class CityArgs(BaseModel):
    city: str


def weather_tools() -> ToolRegistry:
    registry = ToolRegistry("go")

    @registry.tool(name="weather", title="Weather", description="The weather in a city.")
    async def weather(args: CityArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"temp": f"3C in {args.city}"}

    return registry


async def test_react_mode_keeps_the_tool_steps_with_the_answer(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"})]), oai.reply("It is 3C in Oslo.")])
    async with chat_stack(scripted, tools=weather_tools()) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice)
        run_id = (await say(alice, conversation, "What is the weather in Oslo?"))["run"]["id"]
        kinds = [f.event for f in await events_of(alice, run_id)]
        assert kinds.index("tool.call") < kinds.index("tool.result") < kinds.index("done")
        assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
        answer = (await thread(alice, conversation))[-1]
        assert (answer["role"], answer["message_type"], answer["content"]) == ("assistant", "text", "It is 3C in Oslo.")
        [step] = answer["tool_events"]
        assert (step["name"], step["input"], step["ok"]) == ("weather", {"city": "Oslo"}, True)
        assert step["result"] == {"temp": "3C in Oslo"} and step["duration_ms"] >= 0
        # The model saw the tool's result, and the tool call came from the run's agent.
        assert step["node_id"] == "ans" and srv.requests()[-1]["body"]["messages"][-1]["role"] == "tool"


async def test_reject_policy_refuses_while_a_run_is_going(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.hang(PARTIAL, seconds=600)])
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        going = (await say(alice, conversation, "Take your time."))["run"]["id"]
        await until_token(alice, going)
        refused = await alice.post(f"/api/v1/conversations/{conversation}/messages",
                                   json={"text": "Another one", "multitask": "reject"})
        assert refused.status_code == 409, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert (await alice.post(f"/api/v1/runs/{going}/cancel")).status_code == 202
        assert (await run_state(alice, going, ENDED))["state"] == "cancelled"
        assert [m["role"] for m in await thread(alice, conversation)] == ["user", "assistant"]
        accepted = await say(alice, conversation, "Now?", multitask="reject")  # nothing going: accepted
        assert accepted["run"]["position"] == 0
        assert (await run_state(alice, accepted["run"]["id"], ENDED))["state"] == "succeeded"


async def test_interrupt_stops_the_active_run_keeps_its_partial_and_starts_the_new_one(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.hang(PARTIAL, seconds=600)])  # then: the echo of the last user message
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        first = (await say(alice, conversation, "Tell me a long story."))["run"]["id"]
        await until_token(alice, first)
        second = await say(alice, conversation, "Stop, just say hi.", multitask="interrupt")
        assert second["run"]["position"] == 1
        seen = await events_of(alice, first)
        shown = "".join(f.data["text"] for f in seen if f.event == "token")
        assert (await run_state(alice, first, ENDED))["state"] == "interrupted"
        assert (await run_state(alice, second["run"]["id"], ENDED))["state"] == "succeeded"
        messages = await thread(alice, conversation)
        assert [(m["role"], m["message_type"]) for m in messages] == [
            ("user", "text"), ("assistant", "interrupted"), ("user", "text"), ("assistant", "text")]
        assert messages[1]["content"] == shown and shown
        assert messages[3]["content"] == "echo: Stop, just say hi."  # the new run answered


async def test_rollback_stops_the_active_run_and_removes_its_turn(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.hang(PARTIAL, seconds=600)])  # then: the echo of the last user message
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        first = (await say(alice, conversation, "Tell me a long story."))["run"]["id"]
        await until_token(alice, first)
        second = await say(alice, conversation, "Stop, just say hi.", multitask="rollback")
        assert second["interrupted"] == first
        assert (await run_state(alice, first, ENDED))["state"] == "interrupted"
        assert (await run_state(alice, second["run"]["id"], ENDED))["state"] == "succeeded"
        messages = await thread(alice, conversation)
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "Stop, just say hi."), ("assistant", "echo: Stop, just say hi.")]
        history = srv.requests()[-1]["body"]["messages"]  # the new run's model call saw no rolled-back turn
        assert not any("long story" in str(m.get("content")) for m in history)


async def test_cancel_mid_stream_persists_the_partial_answer(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.hang(PARTIAL, seconds=600)])
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        run_id = (await say(alice, conversation, "Go on."))["run"]["id"]
        shown: list[str] = []
        async for frame in frames(alice, run_id):
            if frame.event == "token":
                if not shown:
                    assert (await alice.post(f"/api/v1/runs/{run_id}/cancel")).status_code == 202
                shown.append(frame.data["text"])
        run = await run_state(alice, run_id, ENDED)
        assert run["state"] == "cancelled" and run["ended_at"]
        messages = await thread(alice, conversation)
        assert [(m["role"], m["message_type"]) for m in messages] == [("user", "text"), ("assistant", "interrupted")]
        assert messages[1]["content"] == "".join(shown) and PARTIAL.startswith(messages[1]["content"].strip())
        assert (await alice.post(f"/api/v1/runs/{run_id}/cancel")).status_code == 409


@pytest.mark.parametrize(("step", "sentence"), [
    (oai.auth_failure(), "The model provider refused the API key."),
    (oai.rate_limited(retry_after=7), "The model is rate limited — retry in "),
])
async def test_a_failure_becomes_an_error_message_with_a_clear_sentence(
    scripted: Settings, srv: oai.OpenAIServer, step: dict[str, Any], sentence: str,
) -> None:
    srv.script([step], then=step)
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        run_id = (await say(alice, conversation, "Hello?"))["run"]["id"]
        events = await events_of(alice, run_id)
        assert events[-1].data["status"] == "failed"
        assert (await run_state(alice, run_id, ENDED))["state"] == "failed"
        messages = await thread(alice, conversation)
        assert [(m["role"], m["message_type"]) for m in messages] == [("user", "text"), ("assistant", "error")]
        assert messages[1]["content"].startswith(sentence), messages[1]["content"]
        # The run's task is not retried on its own: that would answer out of the conversation's turn.
        retried = await alice.post(f"/api/v1/tasks/{run_id}/retry")
        assert retried.status_code == 409 and "chat run" in retried.json()["detail"]


async def test_a_failure_mid_stream_keeps_the_partial_and_says_why(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.malformed(PARTIAL)])  # the stream breaks after text went out: never retried
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        run_id = (await say(alice, conversation, "Hello?"))["run"]["id"]
        events = await events_of(alice, run_id)
        shown = "".join(f.data["text"] for f in events if f.event == "token")
        assert events[-1].data["status"] == "failed" and shown
        assert (await run_state(alice, run_id, ENDED))["state"] == "failed"
        messages = await thread(alice, conversation)
        assert [(m["role"], m["message_type"]) for m in messages] == [
            ("user", "text"), ("assistant", "interrupted"), ("assistant", "error")]
        assert messages[1]["content"] == shown
        assert messages[2]["content"] == "The model's answer broke off mid-stream."
        audit = await (await stack.client(admin=True)).get("/api/v1/admin/audit", params={"route": "messages"})
        assert any(e["target"] == f"run_id={run_id}" for e in audit.json()["items"])


async def test_the_messages_model_wins_over_the_conversations(settings: Settings) -> None:
    async with chat_stack(settings) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct", model="no-such-model")
        chosen = (await say(alice, conversation, "Hi there.", model="offline"))["run"]["id"]
        run = await run_state(alice, chosen, ENDED)
        assert (run["state"], run["model"]) == ("succeeded", "offline")
        default = (await say(alice, conversation, "Hi again."))["run"]["id"]
        assert (await run_state(alice, default, ENDED))["state"] == "failed"
        error = (await thread(alice, conversation))[-1]
        assert error["message_type"] == "error" and error["content"].startswith("Unknown model id.")
        assert "no-such-model" in error["content"]
