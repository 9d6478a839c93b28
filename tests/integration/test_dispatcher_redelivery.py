"""A task whose processing keeps dying ends `failed` with code `redelivery_exhausted`, a status
and a done event, instead of being retried forever or forgotten (consumer `max_deliver` = 2):

- a poison task (its checkpoint is garbage, so every delivery crashes the handler) is ended by
  the dispatcher on its last delivery;
- a task whose dispatcher processes are SIGKILLed on both deliveries is ended by a live
  dispatcher on JetStream's MAX_DELIVERIES advisory — or, when no dispatcher was alive to hear
  it, by the next one to start (the dead-letter stream kept the advisory).

And a checkpoint over NATS max_payload, which used to crash every delivery, now ends the task at
once with `checkpoint_too_large`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError
from pydantic import BaseModel

from services.dispatcher.engine.checkpoint import Checkpoint
from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolContext, ToolRegistry, serve_tools
from shared.contract.events import AnyEvent
from shared.contract.task import TaskMessage
from shared.settings import Settings
from tests.conftest import drop_deployment, make_settings
from tests.support.dispatcher import dispatcher, dispatcher_process
from tests.support.nats_server import NatsServer

TIMEOUT_S = 30.0
MAX_DELIVER = 2


class NoArgs(BaseModel):
    pass


@pytest.fixture
async def setup(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[tuple[Settings, Bus]]:
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=1.0, task_max_deliver=MAX_DELIVER)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    yield settings, bus
    await drop_deployment(bus)
    await bus.close()


async def all_events(bus: Bus, task_id: str) -> list[AnyEvent]:
    out: list[AnyEvent] = []
    async with asyncio.timeout(TIMEOUT_S):
        async for _, event in read_events(bus, task_id, follow=True):
            out.append(event)
    return out


def assert_exhausted(events: list[AnyEvent]) -> None:
    status, done = events[-2], events[-1]
    assert status.type == "status" and status.status == "failed" and status.code == "redelivery_exhausted"
    assert f"delivered {MAX_DELIVER} times" in (status.error or "")
    assert done.type == "done" and done.status == "failed"
    assert [e.n for e in events] == list(range(1, len(events) + 1))


async def stored_checkpoint(bus: Bus, task_id: str) -> Checkpoint:
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    return Checkpoint.from_bytes((await kv.get(task_id)).value or b"")


async def tasks_left(bus: Bus) -> int:
    return (await bus.js.stream_info(bus.names.tasks_stream)).state.messages


def line_dsl(*tools: str) -> dict[str, Any]:
    ids = ["in", *[f"n{i}" for i in range(len(tools))], "out"]
    nodes = [{"id": "in", "kind": "input"},
             *[{"id": f"n{i}", "kind": "tool", "config": {"tool": t}} for i, t in enumerate(tools)],
             {"id": "out", "kind": "output", "config": {"value": "done"}}]
    return {"version": "1", "nodes": nodes, "edges": [{"source": a, "target": b} for a, b in itertools.pairwise(ids)]}


async def test_a_poison_task_fails_on_its_last_delivery(setup: tuple[Settings, Bus]) -> None:
    settings, bus = setup
    # A checkpoint that does not parse: loading it crashes every delivery before any ack.
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    await kv.put("t-poison", b'{"task_id": "t-poison", "nodes": "not a map"}')
    no_tools = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
    names = bus.names
    terminated = await bus.nc.subscribe(
        f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{names.tasks_stream}.{names.dispatcher_consumer}")
    try:
        async with dispatcher(settings):
            await bus.js_publish(bus.subjects.tasks_submit,
                                 TaskMessage(task_id="t-poison", user_id="u1", dsl=line_dsl()), msg_id="t-poison")
            events = await all_events(bus, "t-poison")
            # Ended by the handler of the last delivery (a `term`), not later by the advisory.
            advisory = await terminated.next_msg(timeout=TIMEOUT_S)
    finally:
        await terminated.unsubscribe()
        for server in no_tools:
            await server.drain()
    assert b'"deliveries":2' in advisory.data.replace(b" ", b"")
    assert [e.type for e in events] == ["status", "done"]  # the graph never started
    assert_exhausted(events)
    # The garbage was replaced by the failure, and the message is gone (no endless redelivery).
    cp = await stored_checkpoint(bus, "t-poison")
    assert (cp.status, cp.code) == ("failed", "redelivery_exhausted")
    assert await tasks_left(bus) == 0


async def dead_letters(bus: Bus) -> int:
    return (await bus.js.stream_info(bus.names.dead_stream)).state.messages


@pytest.mark.parametrize("live_at_exhaustion", [True, False], ids=["live", "none-alive"])
async def test_dispatchers_killed_on_every_delivery(
    setup: tuple[Settings, Bus], tmp_path: Path, live_at_exhaustion: bool
) -> None:
    settings, bus = setup
    holders: list[str] = []
    entered = asyncio.Event()
    registry = ToolRegistry("go")

    @registry.tool(name="hold", title="Hold", description="Never answers: its caller is killed meanwhile.")
    async def hold(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
        holders.append(ctx.meta.node_id or "")
        entered.set()
        await asyncio.Event().wait()
        return {}

    servers = [await serve_tools(bus, registry), await serve_tools(bus, ToolRegistry("py"))]
    procs: list[subprocess.Popen[bytes]] = []

    async def holding_dispatcher() -> subprocess.Popen[bytes]:
        """A dispatcher process, once it runs the task's `hold` node."""
        entered.clear()
        proc = dispatcher_process(settings, tmp_path / f"dispatcher{len(procs)}.log")
        procs.append(proc)
        async with asyncio.timeout(TIMEOUT_S):
            await entered.wait()
        return proc

    async def kill(proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)

    try:
        await bus.js_publish(bus.subjects.tasks_submit,
                             TaskMessage(task_id="t-dies", user_id="u1", dsl=line_dsl("hold")), msg_id="t-dies")
        await kill(await holding_dispatcher())  # delivery 1
        last = await holding_dispatcher()  # delivery 2, the last one
        if not live_at_exhaustion:  # nobody hears the advisory: it must wait in the dead letters
            await kill(last)
            # The server announces the exhaustion when it next looks for work to hand out — here
            # to one more dispatcher that asks and dies before it could hear anything.
            doomed = await bus.js.pull_subscribe_bind(durable=bus.names.dispatcher_consumer,
                                                      stream=bus.names.tasks_stream)
            with contextlib.suppress(NatsTimeout, TimeoutError):
                assert not await doomed.fetch(1, timeout=3)
            await doomed.unsubscribe()
            for _ in range(int(TIMEOUT_S / 0.05)):
                if await dead_letters(bus):
                    break
                await asyncio.sleep(0.05)
            assert await dead_letters(bus) == 1
        # A live dispatcher that never gets the task (no delivery is left) records the failure.
        async with dispatcher(settings):
            await kill(last)
            events = await all_events(bus, "t-dies")
            for _ in range(int(TIMEOUT_S / 0.05)):  # the advisory's handler deletes it after the events
                if not await tasks_left(bus) and not await dead_letters(bus):
                    break
                await asyncio.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for server in servers:
            with contextlib.suppress(Exception):
                await server.drain(timeout_s=0.1)
    assert holders == ["n0", "n0"]  # each delivery reached the node once; nothing ran a third time
    assert_exhausted(events)
    assert [e.node_id for e in events if e.type == "node.end"] == ["in"]  # `in` finished before the first kill
    cp = await stored_checkpoint(bus, "t-dies")
    assert (cp.status, cp.code) == ("failed", "redelivery_exhausted")
    assert cp.nodes["in"].status == "done"  # the progress stays for a retry
    with contextlib.suppress(NotFoundError):
        assert await tasks_left(bus) == 0
    assert await dead_letters(bus) == 0  # the dead letter is acked once the failure is recorded


class SizeArgs(BaseModel):
    kb: int


async def test_an_oversize_checkpoint_fails_at_once_instead_of_crash_looping(setup: tuple[Settings, Bus]) -> None:
    """Two 600 KB node outputs fit in their tool replies but not in one checkpoint (NATS
    max_payload): the task ends `checkpoint_too_large` on its first delivery."""
    settings, bus = setup
    registry = ToolRegistry("go")

    @registry.tool(name="blob", title="Blob", description="Returns `kb` kilobytes of text.")
    async def blob(args: SizeArgs, ctx: ToolContext) -> str:
        return "z" * (args.kb * 1024)

    servers = [await serve_tools(bus, registry), await serve_tools(bus, ToolRegistry("py"))]
    nodes = [{"id": "in", "kind": "input"},
             {"id": "a", "kind": "tool", "config": {"tool": "blob", "args": {"kb": 600}}},
             {"id": "b", "kind": "tool", "config": {"tool": "blob", "args": {"kb": 600}}},
             {"id": "out", "kind": "output", "config": {"value": "{{ a | length }}"}}]
    dsl = {"version": "1", "nodes": nodes,
           "edges": [{"source": s, "target": t} for s, t in (("in", "a"), ("a", "b"), ("b", "out"))]}
    try:
        async with dispatcher(settings):
            await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id="t-big", user_id="u1", dsl=dsl),
                                 msg_id="t-big")
            events = await all_events(bus, "t-big")
    finally:
        for server in servers:
            await server.drain()
    status, done = events[-2], events[-1]
    assert status.type == "status" and status.code == "checkpoint_too_large", status
    assert str(bus.nc.max_payload) in (status.error or "")
    assert done.type == "done" and done.status == "failed"
    assert [(e.node_id, e.status) for e in events if e.type == "node.end"] == [("in", "done"), ("a", "done"),
                                                                              ("b", "failed")]
    assert [e.status for e in events if e.type == "status"] == ["running", "failed"]  # one delivery
    cp = await stored_checkpoint(bus, "t-big")
    assert (cp.status, cp.code) == ("failed", "checkpoint_too_large") and cp.nodes == {}
    assert await tasks_left(bus) == 0
