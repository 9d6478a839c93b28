"""A chat run survives its dispatcher: a conversation posted through the gateway, two dispatchers
as their own processes, and the one answering is SIGKILLed mid-answer (the scripted model holds
its stream on a gate, so the kill surely lands mid-stream). The other takes the run over: it
ends `succeeded`, the stored assistant message is the whole answer, the run's replay is numbered
1..N once each and equals what a live SSE reader saw, no token reached the reader twice, a tool
call that had finished is not made again, and the model is not asked again for a finished step
(only the cut-off one is asked a second time)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from shared.bus import Bus
from shared.bus.tools import ToolContext, ToolRegistry
from shared.contract.heartbeat import Heartbeat
from shared.settings import Settings
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
from tests.integration.conftest import scripted_settings
from tests.support import faults
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher_process
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

ANSWER = "It is 3C in Oslo, says the weather tool, and calm."
GATE_AFTER = 4  # stream events before the gate: the role chunk and three 4-character pieces


@pytest.fixture
def crashable(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer) -> Settings:
    """The scripted model, and a lease short enough that a takeover comes soon after the kill."""
    return scripted_settings(nats_server, tmp_path, srv, task_ack_wait_s=2.0, heartbeat_interval_s=0.3)


class CityArgs(BaseModel):
    city: str


def counted_weather(calls: list[str]) -> ToolRegistry:
    registry = ToolRegistry("go")

    @registry.tool(name="weather", title="Weather", description="The weather in a city.")
    async def weather(args: CityArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append(args.city)
        return {"temp": f"3C in {args.city}"}

    return registry


@contextlib.asynccontextmanager
async def two_dispatchers(settings: Settings, logs: Path) -> AsyncIterator[tuple[list[subprocess.Popen[bytes]],
                                                                               dict[str, Heartbeat]]]:
    """Two dispatcher processes on the stack's deployment, both alive, and their latest
    heartbeats by instance (what `kill_the_owner` picks the victim by)."""
    bus = await Bus.connect(settings, name="chat-crash")
    beats: dict[str, Heartbeat] = {}

    async def on_beat(msg: Any) -> None:
        beat = Heartbeat.model_validate_json(msg.data)
        beats[beat.instance] = beat

    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"), cb=on_beat)
    env = {"AGENTIX_LLM_BASE_URL": str(settings.llm_base_url), "AGENTIX_LLM_MODEL": str(settings.llm_model),
           "AGENTIX_LLM_API_KEY": "k", "AGENTIX_LLM_RETRY_ATTEMPTS": "1"}
    procs = [dispatcher_process(settings, logs / f"dispatcher{i}.log", **env) for i in range(2)]
    try:
        await faults.dispatchers_alive(bus, procs, timeout_s=WAIT_S)
        yield procs, beats
    finally:
        await sub.unsubscribe()
        await faults.stop_all(procs, timeout_s=20)
        await bus.close()


async def follow(client: httpx.AsyncClient, run_id: str, seen: list[Frame]) -> None:
    """A live SSE reader of the run, from its first event to `done`."""
    async with asyncio.timeout(WAIT_S):
        async for frame in frames(client, run_id):
            seen.append(frame)


async def streaming_after(seen: list[Frame], marker: str | None, reader: asyncio.Task[None],
                          srv: oai.OpenAIServer, logs: Path) -> None:
    """Until the live reader has a token of the model turn after the last `marker` event (or
    any token): the dispatcher is mid-answer, held there by the model's gate. A reader that
    ended raises its failure at once; a wait that runs out says what was seen, what the model
    was asked and what the dispatchers logged."""
    async def holds() -> bool:
        if reader.done():
            reader.result()  # the reader's failure, if it failed
            raise AssertionError(f"the reader ended before the answer streamed: {digest(seen)}")
        marks = [i for i, f in enumerate(seen) if f.event == marker] if marker else [-1]
        return bool(marks) and any(f.event == "token" for f in seen[marks[-1] + 1:])

    try:
        await eventually(holds, attempts=int(WAIT_S / 0.05), every_s=0.05)
    except AssertionError as exc:
        asked = [r["body"]["messages"][-1] for r in srv.requests()]
        logged = await asyncio.to_thread(lambda: "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(logs.glob("dispatcher*.log"))))
        raise AssertionError(f"{exc}; seen {digest(seen)}; the model was asked {asked}\n{logged}") from exc


def digest(seen: list[Frame]) -> list[tuple[int | None, Any, str, Any]]:
    return [(f.id, f.data.get("n"), f.event, f.data.get("text")) for f in seen]


async def check_taken_over(client: httpx.AsyncClient, conversation: str, run_id: str,
                           seen: list[Frame]) -> dict[str, Any]:
    """The checks every crash case makes; returns the stored assistant message."""
    assert seen[-1].event == "done" and seen[-1].data["status"] == "done", seen[-1]
    assert (await run_state(client, run_id, ENDED))["state"] == "succeeded"
    numbers = [f.data["n"] for f in seen]
    assert numbers == list(range(1, len(numbers) + 1)), numbers  # contiguous, each once
    replay = await events_of(client, run_id)
    assert digest(replay) == digest(seen)  # the replay is what the live reader saw
    tokens = "".join(f.data["text"] for f in seen if f.event == "token" and f.data.get("node_id") == "ans")
    assert tokens == ANSWER, "tokens streamed twice or lost"
    said = await thread(client, conversation)
    assert [(m["role"], m["message_type"]) for m in said] == [("user", "text"), ("assistant", "text")]
    assert said[1]["content"] == ANSWER  # the stored answer is whole
    return said[1]


async def test_react_run_sigkilled_mid_answer_is_finished_without_repeating_the_tool_or_a_token(
    crashable: Settings, srv: oai.OpenAIServer, tmp_path: Path,
) -> None:
    calls: list[str] = []
    srv.script([
        oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"}, id="w1")]),
        oai.reply(ANSWER, gate="react-cut", gate_after=GATE_AFTER),  # held mid-answer; its dispatcher dies
        oai.reply(ANSWER),  # the new owner's regeneration of the cut-off turn
    ])
    async with chat_stack(crashable, with_dispatcher=False, tools=counted_weather(calls)) as stack, \
            two_dispatchers(crashable, tmp_path) as (procs, beats):
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="react")
        run_id = (await say(alice, conversation, "What is the weather in Oslo?"))["run"]["id"]
        seen: list[Frame] = []
        reader = asyncio.create_task(follow(alice, run_id, seen))
        # The tool ran; the answer after it is streaming.
        await streaming_after(seen, "tool.result", reader, srv, tmp_path)

        await faults.kill_the_owner(beats, procs)
        await reader

        answer = await check_taken_over(alice, conversation, run_id, seen)
        [step] = answer["tool_events"]
        assert (step["name"], step["input"], step["ok"]) == ("weather", {"city": "Oslo"}, True)
        assert calls == ["Oslo"]  # the finished call was not made again
        asked = srv.requests()
        # The step that called the tool was asked once; the cut-off answer twice (before and
        # after the kill), both times with the one tool result the first call produced.
        assert len(asked) == 3, [r["body"]["messages"][-1] for r in asked]
        assert not any(m["role"] == "tool" for m in asked[0]["body"]["messages"])
        for again in asked[1:]:
            assert [m["tool_call_id"] for m in again["body"]["messages"] if m["role"] == "tool"] == ["w1"]
        assert sum(f.event == "tool.call" for f in seen) == 1


async def test_direct_run_sigkilled_mid_answer_is_finished_without_repeating_a_token(
    crashable: Settings, srv: oai.OpenAIServer, tmp_path: Path,
) -> None:
    srv.script([oai.reply(ANSWER, gate="direct-cut", gate_after=GATE_AFTER), oai.reply(ANSWER)])
    async with chat_stack(crashable, with_dispatcher=False) as stack, \
            two_dispatchers(crashable, tmp_path) as (procs, beats):
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        run_id = (await say(alice, conversation, "Weather in Oslo?"))["run"]["id"]
        seen: list[Frame] = []
        reader = asyncio.create_task(follow(alice, run_id, seen))
        await streaming_after(seen, None, reader, srv, tmp_path)
        shown_before = "".join(f.data["text"] for f in seen if f.event == "token")

        await faults.kill_the_owner(beats, procs)
        await reader

        await check_taken_over(alice, conversation, run_id, seen)
        assert shown_before and ANSWER.startswith(shown_before) and shown_before != ANSWER
        assert len(srv.requests()) == 2  # the cut-off answer was asked again, once
