"""The dispatcher on real NATS (in-process): a submitted task runs to `done` with events; an
approval resumes through the resume subject after the dispatcher restarted; cancel of a parked
task; an approval timer; a compile failure (`unknown_tool`), and a task that waits for a tool
service that is down instead of failing so."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import KeyNotFoundError
from pydantic import BaseModel

from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolContext, ToolRegistry, serve_tools
from shared.contract.events import AnyEvent
from shared.contract.task import CancelMessage, ResumeMessage, TaskMessage
from shared.settings import Settings
from tests.conftest import make_settings
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer

TIMEOUT_S = 30.0


class CountArgs(BaseModel):
    label: str = ""


def counting_tools(calls: list[str]) -> ToolRegistry:
    registry = ToolRegistry("go")

    @registry.tool(name="count", title="Count", description="Appends the calling node to a list.")
    async def count(args: CountArgs, ctx: ToolContext) -> dict[str, Any]:
        calls.append(ctx.meta.node_id or "")
        return {"node": ctx.meta.node_id, "label": args.label, "n": len(calls)}

    return registry


def doc(nodes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Any]:
    return {"version": "1", "nodes": nodes, "edges": [{"source": a, "target": b} for a, b in edges]}


async def submit(bus: Bus, task_id: str, dsl: dict[str, Any], **extra: Any) -> None:
    await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id=task_id, user_id="u1", dsl=dsl, **extra),
                         msg_id=task_id)


async def events_until(bus: Bus, task_id: str, stop_status: str | None = None) -> list[AnyEvent]:
    """Read the task's events until `done` (or a status event with `stop_status`)."""
    out: list[AnyEvent] = []
    async with asyncio.timeout(TIMEOUT_S):
        async for _, event in read_events(bus, task_id, follow=True):
            out.append(event)
            if stop_status and event.type == "status" and event.status == stop_status:
                break
    return out


@pytest.fixture
async def setup(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[tuple[Settings, Bus, list[str]]]:
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=3.0)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    calls: list[str] = []
    server = await serve_tools(bus, counting_tools(calls))
    no_py_tools = await serve_tools(bus, ToolRegistry("py"))  # answers list_tools at once
    yield settings, bus, calls
    await server.drain()
    await no_py_tools.drain()
    await bus.close()


async def test_submitted_task_runs_to_done_with_events(setup: tuple[Settings, Bus, list[str]]) -> None:
    settings, bus, calls = setup
    dsl = doc([{"id": "in", "kind": "input"},
               {"id": "ans", "kind": "agent", "config": {"prompt": "Say hello to {{ in.name }}"}},
               {"id": "rec", "kind": "tool", "config": {"tool": "count", "args": {"label": "{{ in.name }}"}}},
               {"id": "out", "kind": "output", "config": {"value": "{{ rec.label }}"}}],
              [("in", "ans"), ("ans", "rec"), ("rec", "out")])
    async with dispatcher(settings):
        await submit(bus, "t-done", dsl, input={"name": "Ada"})
        events = await events_until(bus, "t-done")
    assert [e.status for e in events if e.type == "status"] == ["running", "done"]
    assert events[-1].type == "done" and events[-1].output == {"out": "Ada"}
    assert [e.n for e in events] == list(range(1, len(events) + 1))
    assert [e.node_id for e in events if e.type == "node.end"] == ["in", "ans", "rec", "out"]
    assert any(e.type == "token" and e.node_id == "ans" for e in events)
    assert calls == ["rec"]
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    with contextlib.suppress(KeyNotFoundError):  # a finished task's checkpoint is removed
        assert not (await kv.get("t-done")).value


async def test_approval_resumes_after_dispatcher_restart(setup: tuple[Settings, Bus, list[str]]) -> None:
    settings, bus, calls = setup
    dsl = doc([{"id": "in", "kind": "input"}, {"id": "a", "kind": "tool", "config": {"tool": "count"}},
               {"id": "ok", "kind": "approval", "config": {"message": "Go on?"}},
               {"id": "b", "kind": "tool", "config": {"tool": "count"}},
               {"id": "out", "kind": "output", "config": {"value": "{{ ok.decision }} by {{ ok.by }}"}}],
              [("in", "a"), ("a", "ok"), ("ok", "b"), ("b", "out")])
    async with dispatcher(settings):
        await submit(bus, "t-appr", dsl)
        first = await events_until(bus, "t-appr", stop_status="waiting")
    assert any(e.type == "approval.request" and e.message == "Go on?" for e in first)
    assert calls == ["a"]
    async with dispatcher(settings):  # a new dispatcher process picks the task up from KV
        await bus.js_publish(bus.subjects.tasks_resume,
                             ResumeMessage(task_id="t-appr", node_id="ok", decision="approve", by="boss"),
                             msg_id="t-appr:resume:ok")
        events = await events_until(bus, "t-appr")
    assert events[-1].type == "done" and events[-1].status == "done"
    assert events[-1].output == {"out": "approve by boss"}
    assert calls == ["a", "b"]  # `a` did not run again
    assert [e.n for e in events] == list(range(1, len(events) + 1))  # numbering continued


async def test_cancel_of_a_parked_task(setup: tuple[Settings, Bus, list[str]]) -> None:
    settings, bus, _ = setup
    dsl = doc([{"id": "in", "kind": "input"}, {"id": "ok", "kind": "approval"}], [("in", "ok")])
    async with dispatcher(settings):
        await submit(bus, "t-cancel", dsl)
        await events_until(bus, "t-cancel", stop_status="waiting")
        await bus.publish(bus.subjects.cancel("t-cancel"), CancelMessage(task_id="t-cancel", by="u1"))
        events = await events_until(bus, "t-cancel")
    assert events[-1].type == "done" and events[-1].status == "cancelled"


async def test_approval_timer_rejects_a_parked_task(setup: tuple[Settings, Bus, list[str]]) -> None:
    settings, bus, _ = setup
    dsl = doc([{"id": "in", "kind": "input"}, {"id": "ok", "kind": "approval", "config": {"timeout_s": 0.5}}],
              [("in", "ok")])
    async with dispatcher(settings):
        await submit(bus, "t-timer", dsl)
        events = await events_until(bus, "t-timer")
    assert events[-1].status == "rejected"
    assert any(e.type == "approval.decision" and e.decision == "timeout" for e in events)


async def test_unknown_tool_fails_the_task_at_compile_time(setup: tuple[Settings, Bus, list[str]]) -> None:
    settings, bus, _ = setup
    dsl = doc([{"id": "in", "kind": "input"}, {"id": "x", "kind": "tool", "config": {"tool": "no_such_tool"}}],
              [("in", "x")])
    async with dispatcher(settings):
        await submit(bus, "t-unknown", dsl)
        events = await events_until(bus, "t-unknown")
    status = [e for e in events if e.type == "status"][-1]
    assert status.status == "failed" and status.code == "unknown_tool" and "no_such_tool" in status.error


class _Said(logging.Handler):
    """Sets `heard` once a record containing `text` is logged (the in-process dispatcher logs on
    the test's loop, so the event is set there)."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text, self.heard = text, asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.heard.set()


async def test_a_task_naming_tools_of_a_service_that_is_down_waits_for_it(nats_server: NatsServer,
                                                                          tmp_path: Path) -> None:
    """A tool service that does not answer `list_tools` (restarting) leaves its tools missing,
    not unknown: the task is tried again once it is back, instead of failing `unknown_tool`."""
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=3.0)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    calls: list[str] = []
    dsl = doc([{"id": "in", "kind": "input"}, {"id": "x", "kind": "tool", "config": {"tool": "count"}}],
              [("in", "x")])
    go_tools = None  # neither tool service is serving yet
    said = _Said("t-waits waits for tool services go, py")
    worker_log = logging.getLogger("agentix.dispatcher.worker")
    worker_log.addHandler(said)
    try:
        async with dispatcher(settings):
            await submit(bus, "t-waits", dsl)
            async with asyncio.timeout(TIMEOUT_S):  # the first try found no `count`, and did not fail
                await said.heard.wait()
            assert not [e async for _, e in read_events(bus, "t-waits", follow=False) if e.type == "status"]
            go_tools = await serve_tools(bus, counting_tools(calls))
            no_py_tools = await serve_tools(bus, ToolRegistry("py"))
            events = await events_until(bus, "t-waits")
            await no_py_tools.drain()
    finally:
        worker_log.removeHandler(said)
        if go_tools is not None:
            await go_tools.drain()
        await bus.close()
    assert events[-1].status == "done" and calls == ["x"]
