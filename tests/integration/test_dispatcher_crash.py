"""Crash recovery with real processes: two dispatchers; SIGKILL the one running a task → the
other takes the task over when the lease lapses and finishes it from the checkpoint. A tool that
records every call proves that no finished node ran twice."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolContext, ToolRegistry, serve_tools
from shared.contract.heartbeat import Heartbeat
from shared.contract.task import TaskMessage
from tests.conftest import make_settings
from tests.support.dispatcher import dispatcher_process
from tests.support.nats_server import NatsServer

TIMEOUT_S = 60.0


class NoArgs(BaseModel):
    pass


async def test_sigkill_mid_graph_another_dispatcher_finishes(nats_server: NatsServer, tmp_path: Path) -> None:
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=2.0, heartbeat_interval_s=0.3)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    calls: list[str] = []
    entered = asyncio.Event()
    release = asyncio.Event()
    registry = ToolRegistry("go")

    @registry.tool(name="count", title="Count", description="Records the calling node.")
    async def count(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append(ctx.meta.node_id or "")
        return {"n": len(calls)}

    @registry.tool(name="hold", title="Hold", description="First call hangs (its caller gets killed).")
    async def hold(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append(ctx.meta.node_id or "")
        if calls.count(ctx.meta.node_id or "") == 1:
            entered.set()
            await release.wait()  # its dispatcher is killed meanwhile
        return {"held": True}

    tools = await serve_tools(bus, registry)
    no_py_tools = await serve_tools(bus, ToolRegistry("py"))  # answers list_tools at once
    beats: dict[str, Heartbeat] = {}
    two_alive = asyncio.Event()
    owner_seen = asyncio.Event()

    async def on_beat(msg: Any) -> None:
        beat = Heartbeat.model_validate_json(msg.data)
        beats[beat.instance] = beat
        if len(beats) >= 2:
            two_alive.set()
        if entered.is_set() and beat.load.inflight > 0:
            owner_seen.set()

    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"), cb=on_beat)
    procs = [dispatcher_process(settings, tmp_path / f"dispatcher{i}.log") for i in range(2)]
    try:
        async with asyncio.timeout(TIMEOUT_S):
            await two_alive.wait()
        nodes = [{"id": "in", "kind": "input"}, {"id": "a", "kind": "tool", "config": {"tool": "count"}},
                 {"id": "b", "kind": "tool", "config": {"tool": "count"}},
                 {"id": "h", "kind": "tool", "config": {"tool": "hold"}},
                 {"id": "c", "kind": "tool", "config": {"tool": "count"}},
                 {"id": "out", "kind": "output", "config": {"value": "{{ c.n }}"}}]
        edges = [("in", "a"), ("a", "b"), ("b", "h"), ("h", "c"), ("c", "out")]
        dsl = {"version": "1", "nodes": nodes, "edges": [{"source": s, "target": t} for s, t in edges]}
        await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id="t-crash", user_id="u1", dsl=dsl),
                             msg_id="t-crash")
        async with asyncio.timeout(TIMEOUT_S):
            await entered.wait()
            # The owner is the instance whose heartbeat reports the task in flight.
            await owner_seen.wait()
        owners = [b for b in beats.values() if b.load.inflight > 0]
        assert len(owners) == 1
        owner_pid = int(owners[0].instance.split("-")[-2])
        victim = next(p for p in procs if p.pid == owner_pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        events = []
        async with asyncio.timeout(TIMEOUT_S):
            async for _, event in read_events(bus, "t-crash", follow=True):
                events.append(event)
        assert events[-1].type == "done" and events[-1].status == "done", events[-1]
        assert events[-1].output == {"out": "5"}
        # a and b finished before the kill and never ran again; h was cut off and ran again.
        assert calls == ["a", "b", "h", "h", "c"]
    finally:
        await sub.unsubscribe()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        release.set()
        await tools.drain()
        await no_py_tools.drain()
        await bus.close()
