"""An agent's tool loop survives its dispatcher: two dispatcher processes; the one running an
agent node is SIGKILLed while one of the model's tool calls is still running. The other takes the
task over and continues the loop from its checkpoint: a call that had finished is not made again,
the model is not asked for that step again, and only the cut-off call runs a second time — also
when the loop was running on from a tool approval (the resume message is what is redelivered)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from services.dispatcher.engine.checkpoint import Checkpoint
from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolContext, ToolRegistry, serve_tools
from shared.contract.heartbeat import Heartbeat
from shared.contract.task import ResumeMessage, TaskMessage
from tests.conftest import make_settings
from tests.support import faults
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher_process
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

TIMEOUT_S = 90.0
TASK = "t-agent-crash"


class NoArgs(BaseModel):
    pass


async def finished_call_checkpointed(bus: Bus) -> bool:
    """The agent's loop state in the task's checkpoint holds the result of the call `c1`."""
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    try:
        entry = await kv.get(TASK)
    except Exception:  # not written yet
        return False
    loop = Checkpoint.from_bytes(entry.value or b"{}").agents.get("act") if entry.value else None
    return loop is not None and "c1" in loop.results


async def test_sigkill_mid_tool_loop_the_next_dispatcher_does_not_repeat_finished_calls(
    nats_server: NatsServer, tmp_path: Path,
) -> None:
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=2.0, heartbeat_interval_s=0.3)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    calls: list[str] = []
    entered = asyncio.Event()
    release = asyncio.Event()
    registry = ToolRegistry("go")

    @registry.tool(name="count", title="Count", description="Counts its calls.")
    async def count(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append("count")
        return {"n": calls.count("count")}

    @registry.tool(name="hold", title="Hold", description="The first call hangs (its caller gets killed).")
    async def hold(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append("hold")
        if calls.count("hold") == 1:
            entered.set()
            await release.wait()
        return {"held": True}

    tools = await serve_tools(bus, registry)
    no_py_tools = await serve_tools(bus, ToolRegistry("py"))
    beats: dict[str, Heartbeat] = {}
    two_alive = asyncio.Event()

    async def on_beat(msg: Any) -> None:
        beat = Heartbeat.model_validate_json(msg.data)
        beats[beat.instance] = beat
        if len(beats) >= 2:
            two_alive.set()

    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"), cb=on_beat)
    async with oai.OpenAIServer() as srv:
        srv.script([
            oai.reply(tool_calls=[oai.tool_call("count", {}, id="c1"), oai.tool_call("hold", {}, id="h1")]),
            oai.reply("Counted once and held."),
        ])
        env = {"AGENTIX_LLM_BASE_URL": srv.url, "AGENTIX_LLM_MODEL": "m", "AGENTIX_LLM_API_KEY": "k",
               "AGENTIX_LLM_RETRY_ATTEMPTS": "1"}
        procs = [dispatcher_process(settings, tmp_path / f"dispatcher{i}.log", **env) for i in range(2)]
        try:
            async with asyncio.timeout(TIMEOUT_S):
                await two_alive.wait()
            dsl = {"version": "1", "nodes": [
                {"id": "in", "kind": "input"},
                {"id": "act", "kind": "agent", "config": {"prompt": "count, then hold", "tools": ["count", "hold"]}},
                {"id": "out", "kind": "output", "config": {"value": "{{ act }}"}},
            ], "edges": [{"source": "in", "target": "act"}, {"source": "act", "target": "out"}]}
            await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id=TASK, user_id="u1", dsl=dsl),
                                 msg_id=TASK)
            async with asyncio.timeout(TIMEOUT_S):
                await entered.wait()
            await eventually(lambda: finished_call_checkpointed(bus), attempts=int(TIMEOUT_S / 0.05), every_s=0.05)

            await faults.kill_the_owner(beats, procs, timeout_s=TIMEOUT_S)

            events = []
            async with asyncio.timeout(TIMEOUT_S):
                async for _, event in read_events(bus, TASK, follow=True):
                    events.append(event)
            assert events[-1].type == "done" and events[-1].status == "done", [e.model_dump() for e in events]
            assert events[-1].output == {"out": "Counted once and held."}
            # `count` finished before the kill and was not called again; `hold` was cut off.
            assert calls == ["count", "hold", "hold"]
            requests = srv.requests()
            assert len(requests) == 2  # the step's model turn was not asked again
            results = {m["tool_call_id"]: json.loads(m["content"])
                       for m in requests[1]["body"]["messages"] if m["role"] == "tool"}
            assert results == {"c1": {"ok": True, "result": {"n": 1}}, "h1": {"ok": True, "result": {"held": True}}}
        finally:
            await sub.unsubscribe()
            await faults.stop_all(procs, timeout_s=20)
            release.set()
            await tools.drain()
            await no_py_tools.drain()
            await bus.close()


class PathArgs(BaseModel):
    path: str


async def test_sigkill_after_an_approved_call_the_redelivered_resume_runs_the_loop_on(
    nats_server: NatsServer, tmp_path: Path,
) -> None:
    task = "t-approved-crash"
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=2.0, heartbeat_interval_s=0.3)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    calls: list[str] = []
    entered = asyncio.Event()
    release = asyncio.Event()
    registry = ToolRegistry("go")

    @registry.tool(name="wipe", title="Wipe", description="Delete a folder.", high_risk=True)
    async def wipe(args: PathArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append("wipe")
        return {"deleted": args.path}

    @registry.tool(name="hold", title="Hold", description="The first call hangs (its caller gets killed).")
    async def hold(args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append("hold")
        if calls.count("hold") == 1:
            entered.set()
            await release.wait()
        return {"held": True}

    tools = await serve_tools(bus, registry)
    no_py_tools = await serve_tools(bus, ToolRegistry("py"))
    beats: dict[str, Heartbeat] = {}

    async def on_beat(msg: Any) -> None:
        beat = Heartbeat.model_validate_json(msg.data)
        beats[beat.instance] = beat

    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"), cb=on_beat)
    async with oai.OpenAIServer() as srv:
        srv.script([
            oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/tmp/old"}, id="w1")]),
            oai.reply(tool_calls=[oai.tool_call("hold", {}, id="h1")]),
            oai.reply("Wiped and held."),
        ])
        env = {"AGENTIX_LLM_BASE_URL": srv.url, "AGENTIX_LLM_MODEL": "m", "AGENTIX_LLM_API_KEY": "k",
               "AGENTIX_LLM_RETRY_ATTEMPTS": "1"}
        procs = [dispatcher_process(settings, tmp_path / f"dispatcher{i}.log", **env) for i in range(2)]
        try:
            await eventually(lambda: _true(len(beats) >= 2), attempts=int(TIMEOUT_S / 0.05), every_s=0.05)
            dsl = {"version": "1", "nodes": [
                {"id": "in", "kind": "input"},
                {"id": "act", "kind": "agent", "config": {"prompt": "wipe, then hold", "tools": ["wipe", "hold"]}},
                {"id": "out", "kind": "output", "config": {"value": "{{ act }}"}},
            ], "edges": [{"source": "in", "target": "act"}, {"source": "act", "target": "out"}]}
            await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id=task, user_id="u1", dsl=dsl),
                                 msg_id=task)
            kv = await bus.js.key_value(bus.names.checkpoints_bucket)

            async def parked() -> bool:
                try:
                    entry = await kv.get(task)
                except Exception:
                    return False
                return bool(entry.value) and Checkpoint.from_bytes(entry.value or b"").status == "waiting"

            await eventually(parked, attempts=int(TIMEOUT_S / 0.05), every_s=0.05)
            decision = ResumeMessage(task_id=task, node_id="act", decision="approve", by="u1")
            await bus.js_publish(bus.subjects.tasks_resume, decision, msg_id=f"{task}:resume:act:1")
            async with asyncio.timeout(TIMEOUT_S):
                await entered.wait()

            await faults.kill_the_owner(beats, procs, timeout_s=TIMEOUT_S)

            events = []
            async with asyncio.timeout(TIMEOUT_S):
                async for _, event in read_events(bus, task, follow=True):
                    events.append(event)
            assert events[-1].type == "done" and events[-1].status == "done", events[-1]
            assert events[-1].output == {"out": "Wiped and held."}
            assert calls == ["wipe", "hold", "hold"]  # the approved call ran once
            assert len(srv.requests()) == 3
        finally:
            await sub.unsubscribe()
            await faults.stop_all(procs, timeout_s=20)
            release.set()
            await tools.drain()
            await no_py_tools.drain()
            await bus.close()


async def _true(value: bool) -> bool:
    return value
