"""Real `python -m services.dispatcher` processes against the scripted OpenAI-protocol server:

- a circuit breaker tripped by tasks on one dispatcher process is honoured by another process
  that never saw a failure: its task skips the model at once (the server never hears of it),
  says so in an event, and the breaker state is in both processes' heartbeats;
- a task's token budget crossed in the middle of a graph stops the whole graph
  (`budget_exceeded`, a `budget {used, limit}` event), however fast the model streams.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.events import read_events
from shared.bus.tools import ToolRegistry, serve_tools
from shared.contract.events import AnyEvent
from shared.contract.heartbeat import Heartbeat
from shared.contract.models import BreakerState, ModelChain, ModelConfig
from shared.contract.task import TaskMessage, TaskOptions
from shared.settings import Settings
from tests.conftest import drop_deployment, make_settings
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher_process
from tests.support.nats_server import NatsServer

TIMEOUT_S = 30.0
DSL_ONE = {"version": "1", "nodes": [{"id": "in", "kind": "input"},
                                     {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.q }}"}},
                                     {"id": "out", "kind": "output", "config": {"value": "{{ ans }}"}}],
           "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}]}


@pytest.fixture(scope="module")
def srv() -> Iterator[oai.OpenAIServer]:
    server = oai.OpenAIServer().start_in_thread()  # its own loop: the processes reach it any time
    yield server
    server.stop_thread()


@pytest.fixture
async def env(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer) -> AsyncIterator[tuple[Settings, Bus]]:
    srv.reset()
    settings = make_settings(nats_server.url, tmp_path / "data")
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    servers = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
    yield settings, bus
    for server in servers:
        await server.drain()
    await drop_deployment(bus)
    await bus.close()


def start_dispatcher(settings: Settings, log: Path, **env: str) -> subprocess.Popen[bytes]:
    return dispatcher_process(settings, log, AGENTIX_HEARTBEAT_INTERVAL_S="0.5", **env)


async def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.to_thread(proc.wait), TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await asyncio.to_thread(proc.wait)


async def heartbeat_of(bus: Bus, proc: subprocess.Popen[bytes], want: str | None = None) -> Heartbeat:
    """The next heartbeat of that process (its pid is in the instance id), optionally one whose
    breaker states mention `want` as open."""
    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"))
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while True:
                beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=TIMEOUT_S)).data)
                if f"-{proc.pid}-" not in beat.instance:
                    continue
                states = {b["model"]: b["state"] for b in beat.detail.get("breakers", [])}
                if want is None or states.get(want) == "open":
                    return beat
    finally:
        await sub.unsubscribe()


async def run_task(bus: Bus, task_id: str, dsl: dict[str, Any], **extra: Any) -> list[AnyEvent]:
    await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id=task_id, user_id="u1", dsl=dsl, **extra),
                         msg_id=task_id)
    out: list[AnyEvent] = []
    async with asyncio.timeout(TIMEOUT_S):
        async for _, event in read_events(bus, task_id, follow=True):
            out.append(event)
    return out


async def put_chain(bus: Bus, url: str, active: str, fallbacks: list[str]) -> None:
    models = {n: ModelConfig(id=n, name=n, base_url=url, model=f"{n}-m") for n in [active, *fallbacks]}
    await ControlPlane(bus).put("models.chain", ModelChain(revision=1, active=active, fallbacks=fallbacks,
                                                            models=models))


def asked(srv: oai.OpenAIServer, model: str) -> int:
    return sum(1 for r in srv.requests() if r["model"] == model)


async def test_a_breaker_tripped_by_one_process_is_honoured_by_another(
        env: tuple[Settings, Bus], srv: oai.OpenAIServer, tmp_path: Path) -> None:
    settings, bus = env
    await put_chain(bus, srv.url, "A", ["B"])
    srv.script([], model="A-m", then=oai.server_error(500, "upstream exploded"))
    srv.script([], model="B-m", then=oai.reply("answer from B"))
    knobs = {"AGENTIX_LLM_RETRY_ATTEMPTS": "1", "AGENTIX_BREAKER_FAILURE_THRESHOLD": "2",
             "AGENTIX_BREAKER_COOLDOWN_S": "600"}
    first = start_dispatcher(settings, tmp_path / "first.log", **knobs)
    second: subprocess.Popen[bytes] | None = None
    try:
        await heartbeat_of(bus, first)
        t1 = await run_task(bus, "t1", DSL_ONE, input={"q": "one"})
        t2 = await run_task(bus, "t2", DSL_ONE, input={"q": "two"})
        first_beat = await heartbeat_of(bus, first, want="A")
        await stop(first)  # from here on only the second process can run a task
        second = start_dispatcher(settings, tmp_path / "second.log", **knobs)
        second_beat = await heartbeat_of(bus, second, want="A")  # it reads the shared state
        t3 = await run_task(bus, "t3", DSL_ONE, input={"q": "three"})
    finally:
        for proc in (first, second):
            if proc is not None:
                await stop(proc)
    for events in (t1, t2, t3):
        assert events[-1].status == "done" and events[-1].output == {"out": "answer from B"}
        assert {e.model for e in events if e.type == "token"} == {"B"}
        end = next(e for e in events if e.type == "node.end" and e.node_id == "ans")
        assert end.usage is not None and end.usage.models == ["B"]
    # t1: A failed once (fail over). t2: A's second failure opened its breaker — said in t2.
    assert [e for e in t1 if e.type == "error"] == []
    [opened] = [e for e in t2 if e.type == "error"]
    assert (opened.code, opened.node_id) == ("breaker_open", "ans")
    assert "'A'" in opened.message and "upstream exploded" in opened.message
    # t3 ran on the second process, which never saw A fail: A was skipped without a request.
    assert asked(srv, "A-m") == 2 and asked(srv, "B-m") == 3
    [skipped] = [e for e in t3 if e.type == "error"]
    assert (skipped.code, skipped.node_id) == ("model_skipped", "ans")
    assert first_beat.instance != second_beat.instance
    state = next(BreakerState.model_validate(b) for b in second_beat.detail["breakers"] if b["model"] == "A")
    assert state.state == "open" and state.failures == 2 and "HTTP 500" in (state.last_error or "")


async def test_a_token_budget_crossed_mid_graph_stops_the_run(
        env: tuple[Settings, Bus], srv: oai.OpenAIServer, tmp_path: Path) -> None:
    settings, bus = env
    await put_chain(bus, srv.url, "A", [])
    long_answer = "word " * 400  # ~500 tokens, streamed 4 characters at a time
    srv.script([oai.reply("short first answer"), oai.reply(long_answer)], model="A-m")
    dsl = {"version": "1",
           "nodes": [{"id": "in", "kind": "input"},
                     {"id": "a1", "kind": "agent", "config": {"prompt": "{{ in.q }}"}},
                     {"id": "a2", "kind": "agent", "config": {"prompt": "More about {{ a1 }}"}},
                     {"id": "a3", "kind": "agent", "config": {"prompt": "Never asked"}}],
           "edges": [{"source": "in", "target": "a1"}, {"source": "a1", "target": "a2"},
                     {"source": "a2", "target": "a3"}]}
    proc = start_dispatcher(settings, tmp_path / "dispatcher.log")
    try:
        events = await run_task(bus, "t-budget", dsl, input={"q": "go"}, options=TaskOptions(token_budget=100))
    finally:
        await stop(proc)
    ends = {e.node_id: e.status for e in events if e.type == "node.end"}
    assert ends == {"in": "done", "a1": "done", "a2": "cancelled"} and "a3" not in ends
    [budget] = [e for e in events if e.type == "budget"]
    assert budget.limit == 100 and 100 < budget.used <= 110 and budget.node_id == "a2"
    status = [e for e in events if e.type == "status"]
    assert [s.status for s in status] == ["running", "budget_exceeded"] and status[-1].code == "budget_exceeded"
    assert events[-1].type == "done" and events[-1].status == "budget_exceeded"
    # The stream was stopped where the budget ran out: only part of the answer went out.
    streamed = "".join(e.text for e in events if e.type == "token" and e.node_id == "a2")
    assert 0 < len(streamed) < len(long_answer) / 2
    assert asked(srv, "A-m") == 2
    a2_end = next(e for e in events if e.type == "node.end" and e.node_id == "a2")
    assert "token budget exceeded" in (a2_end.error or "")
