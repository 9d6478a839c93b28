"""The bus layer against a real nats-server: declarations, events replay/tail, tools, control."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors
import pytest
from pydantic import BaseModel

from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.dead_letters import DeadLetters
from shared.bus.events import EventPublisher, last_event_n, read_events, reader_js
from shared.bus.heartbeat import Heartbeater, gather_health, serve_health
from shared.bus.tools import ToolClient, ToolContext, ToolFailure, ToolRegistry, serve_tools
from shared.contract.events import DoneEvent, NodeStartEvent, StatusEvent, TokenEvent
from shared.contract.heartbeat import Heartbeat
from shared.contract.models import ModelChain, ModelConfig
from shared.contract.tools import ToolMeta
from shared.settings import Settings


async def test_declare_is_idempotent(bus: Bus) -> None:
    await bus.declare()
    await bus.declare()
    info = await bus.js.stream_info(bus.names.tasks_stream)
    assert info.config.subjects == [bus.subjects.tasks_submit, bus.subjects.tasks_resume]
    consumer = await bus.js.consumer_info(bus.names.tasks_stream, "dispatcher")
    assert consumer.config.max_deliver == bus.settings.task_max_deliver


async def test_events_replay_from_any_sequence_then_tail(bus: Bus) -> None:
    pub = EventPublisher(bus, "task1")
    await pub.emit(StatusEvent(task_id="", status="running"))
    for i in range(50):
        await pub.emit(TokenEvent(task_id="", node_id="a", text=f"w{i} "))
    await pub.flush()

    seen = [(seq, ev) async for seq, ev in read_events(bus, "task1", follow=False)]
    assert [ev.n for _, ev in seen] == list(range(1, 52))
    cut = seen[20][0]
    rest = [ev async for _, ev in read_events(bus, "task1", after_seq=cut, follow=False)]
    assert [ev.n for ev in rest] == list(range(22, 52))

    async def tail() -> list[str]:
        return [ev.type async for _, ev in read_events(bus, "task1", after_seq=seen[-1][0])]

    tailer = asyncio.create_task(tail())
    await asyncio.sleep(0.2)
    await pub.emit(NodeStartEvent(task_id="", node_id="b", kind="output"))
    await pub.emit(DoneEvent(task_id="", status="done", output={"x": 1}))
    await pub.flush()
    assert await asyncio.wait_for(tailer, 5) == ["node.start", "done"]
    assert await last_event_n(bus, "task1") == 53


async def test_read_events_filters_channels(bus: Bus) -> None:
    pub = EventPublisher(bus, "t2")
    await pub.emit(StatusEvent(task_id="", status="running"))
    await pub.emit(TokenEvent(task_id="", node_id="a", text="hi"))
    await pub.emit(NodeStartEvent(task_id="", node_id="a", kind="agent"))
    await pub.emit(DoneEvent(task_id="", status="done"))
    await pub.flush()
    types = [ev.type async for _, ev in read_events(bus, "t2", channels={"exec", "status"})]
    assert types == ["status", "node.start", "done"]


async def test_read_events_asks_the_server_for_the_channels_read_only(bus: Bus) -> None:
    """Without follow, a read of status+exec ends after the last of those even when tokens come
    later, and the server never sends the tokens (the subscription sees only what it asked)."""
    pub = EventPublisher(bus, "t3")
    await pub.emit(StatusEvent(task_id="", status="running"))
    await pub.emit(NodeStartEvent(task_id="", node_id="a", kind="agent"))
    for i in range(200):
        await pub.emit(TokenEvent(task_id="", node_id="a", text=f"w{i}"))
    await pub.flush()
    delivered: list[str] = []
    reader = reader_js(bus)
    real_subscribe = reader.subscribe

    async def counting_subscribe(*args: Any, **kwargs: Any) -> Any:
        sub = await real_subscribe(*args, **kwargs)
        delivered.append(",".join(kwargs["config"].filter_subjects or []))
        return sub

    reader.subscribe = counting_subscribe  # type: ignore[method-assign]
    try:
        seen = [ev.type async for _, ev in read_events(bus, "t3", channels=("status", "exec"), follow=False)]
    finally:
        reader.subscribe = real_subscribe  # type: ignore[method-assign]
    assert seen == ["status", "node.start"]
    assert delivered == [f"{bus.subjects.events('t3', 'exec')},{bus.subjects.events('t3', 'status')}"]
    # Only tokens after node.start: a status+exec read from there has nothing and ends at once.
    start = [seq async for seq, _ in read_events(bus, "t3", follow=False)][1]

    async def rest() -> list[Any]:
        return [x async for x in read_events(bus, "t3", after_seq=start, channels=("status", "exec"), follow=False)]

    assert await asyncio.wait_for(rest(), 5) == []


async def test_empty_log_without_follow_ends(bus: Bus) -> None:
    assert [x async for x in read_events(bus, "nobody", follow=False)] == []


async def test_read_events_waits_for_a_leader_to_create_its_consumer(bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer create that times out (the stream or the meta group electing a leader) is
    asked again, with a consumer config of its own each time, instead of failing the reader."""
    publisher = EventPublisher(bus, "t4")
    await publisher.emit(StatusEvent(task_id="t4", status="running"))
    await publisher.emit(DoneEvent(task_id="t4", status="done"))
    await publisher.flush()
    reader = reader_js(bus)  # readers make their consumers with this context (2 s requests)
    real = reader.subscribe
    configs: list[object] = []

    async def no_leader_yet(*args: Any, **kwargs: Any) -> Any:
        configs.append(kwargs["config"])
        if len(configs) <= 2:
            raise nats.errors.TimeoutError
        return await real(*args, **kwargs)

    monkeypatch.setattr(reader, "subscribe", no_leader_yet)
    assert [ev.type async for _, ev in read_events(bus, "t4")] == ["status", "done"]
    assert len(configs) == 3 and len({id(c) for c in configs}) == 3


class EchoArgs(BaseModel):
    text: str
    user_id: str | None = None


async def test_tool_service_roundtrip_errors_and_discovery(bus: Bus) -> None:
    registry = ToolRegistry("go")

    @registry.tool(name="echo", title="Echo", description="Echo text", inject=("user_id",))
    async def echo(args: EchoArgs, ctx: ToolContext) -> dict:
        if args.text == "fail":
            raise ToolFailure("nope", "asked to fail")
        if args.text == "crash":
            raise RuntimeError("secret internals")
        return {"text": args.text, "user": args.user_id, "task": ctx.meta.task_id}

    server = await serve_tools(bus, registry)
    client = ToolClient(bus)
    tools = await client.list_tools()
    assert [t.name for t in tools] == ["echo"] and tools[0].inject == ["user_id"]
    reply = await client.call("echo", {"text": "hi", "user_id": "u1"}, ToolMeta(task_id="t"))
    assert reply.ok and reply.result == {"text": "hi", "user": "u1", "task": "t"}
    bad = await client.call("echo", {"text": "fail"})
    assert not bad.ok and bad.error and bad.error.code == "nope"
    crash = await client.call("echo", {"text": "crash"})
    assert not crash.ok and crash.error and "secret" not in crash.error.message
    args = await client.call("echo", {"wrong": 1})
    assert not args.ok and args.error and args.error.code == "bad_arguments"
    unknown = await client.call("nope", {})
    assert not unknown.ok and unknown.error and unknown.error.code == "unknown_tool"

    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox)
    await bus.nc.publish("$SRV.PING.tools-go", b"", reply=inbox)
    msg = await sub.next_msg(timeout=2)
    assert b"tools-go" in msg.data
    await server.drain()
    gone = await client.call("echo", {"text": "x"}, timeout_s=0.5)
    assert not gone.ok and gone.error and gone.error.code in {"unavailable", "timeout"}


async def test_heartbeat_and_health(bus: Bus) -> None:
    sub = await bus.nc.subscribe(bus.subjects.heartbeat_all)
    hb = Heartbeater(bus, "dispatcher")
    hb.start()
    msg = await sub.next_msg(timeout=3)
    beat = Heartbeat.model_validate_json(msg.data)
    assert beat.service == "dispatcher" and beat.instance == hb.instance
    await hb.stop()

    async def checks() -> dict:
        return {"db": {"ok": True}}

    await serve_health(bus, "gateway", "g1", checks)
    await serve_health(bus, "gateway", "g2", checks)
    replies = await gather_health(bus, "gateway")
    assert sorted(r.instance for r in replies) == ["g1", "g2"] and all(r.ok for r in replies)


async def test_control_plane_late_starter_and_broadcast(bus: Bus, settings: Settings) -> None:
    writer = ControlPlane(bus)
    chain = ModelChain(active="a", models={"a": ModelConfig(id="1", name="a", model="m")})
    await writer.put("models.chain", chain)

    late_bus = await Bus.connect(settings, "late")
    seen: list[tuple[str, int]] = []
    reader = ControlPlane(late_bus)
    await reader.watch(lambda key, value, rev: seen.append((value["active"], rev)))
    assert seen and seen[0][0] == "a"  # loaded before watch() returned

    await writer.put("models.chain", chain.model_copy(update={"active": "b"}))
    for _ in range(50):
        if len(seen) == 2:
            break
        await asyncio.sleep(0.05)
    assert [s[0] for s in seen] == ["a", "b"]  # applied once, though it came twice
    await reader.stop()
    await late_bus.close()


@pytest.mark.parametrize("n", [3])
async def test_dedupe_by_msg_id(bus: Bus, n: int) -> None:
    dup = []
    for _ in range(n):
        ack = await bus.js_publish(bus.subjects.tasks_submit, StatusEvent(task_id="x", status="s"), msg_id="x")
        dup.append(ack.duplicate)
    assert dup == [None, True, True] or dup == [False, True, True]


async def test_dead_letters_wait_for_a_worker_and_are_retried_until_recorded(bus: Bus) -> None:
    """An exhaustion advisory nobody heard is kept; a handler that fails gets it again."""
    n = bus.names
    subject = n.exhausted_subject(n.tasks_stream, n.dispatcher_consumer)
    await bus.nc.publish(subject, b'{"stream_seq": 42, "deliveries": 3}')
    await bus.nc.publish(n.exhausted_subject(n.ingest_stream, n.ingest_consumer), b'{"stream_seq": 7}')
    await bus.nc.flush()
    calls: list[tuple[int, int]] = []
    recorded = asyncio.Event()

    async def record(seq: int, deliveries: int) -> None:
        calls.append((seq, deliveries))
        if len(calls) == 1:
            raise ConnectionError("the database is away")
        recorded.set()

    dead = DeadLetters(bus, n.dispatcher_consumer, record, retry_delay_s=0.2)
    await dead.start()
    try:
        await asyncio.wait_for(recorded.wait(), 10)
        for _ in range(100):
            if (await bus.js.consumer_info(n.dead_stream, n.dead_consumer(n.dispatcher_consumer))).num_ack_pending == 0:
                break
            await asyncio.sleep(0.05)
    finally:
        await dead.stop()
    assert calls == [(42, 3), (42, 3)]  # only its own queue's letter, the second time recorded
    info = await bus.js.stream_info(n.dead_stream)
    assert info.state.messages == 1  # acked and gone; the ingest letter waits for an ingest worker
