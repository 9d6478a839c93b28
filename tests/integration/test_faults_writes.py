"""A write whose ack is lost (the leader died after storing it) or that was never stored is retried
without a trace: one revision per KV write, each event `n` once, and never an older checkpoint
over a newer one. The faults are made at the client: its publish stores and then reports a
failure, or reports a failure without sending."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import nats.errors
import nats.js.errors
import pytest

from services.dispatcher import checkpoints_kv as checkpoints_module
from services.dispatcher.checkpoints_kv import KVCheckpointStore
from services.dispatcher.engine.checkpoint import Checkpoint
from shared.bus import Bus
from shared.bus import events as events_module
from shared.bus import pipelined as pipelined_module
from shared.bus.events import EventPublisher, read_events
from shared.bus.kv import kv_create, kv_put, kv_update
from shared.bus.pipelined import pipeline_for
from shared.bus.retry import ACK_TIMEOUT_S
from shared.contract.events import TokenEvent
from tests.support.wait import eventually

pytestmark = pytest.mark.chaos


def ack_lost_once(target: Any, name: str) -> list[str]:
    """The next call of `target.name` really happens, then fails as if its ack was lost."""
    real: Callable[..., Awaitable[Any]] = getattr(target, name)
    faults: list[str] = []

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        if not faults:
            faults.append("ack lost")
            raise nats.errors.TimeoutError
        return result

    setattr(target, name, flaky)
    return faults


async def revisions(kv: Any, key: str) -> list[bytes]:
    return [entry.value for entry in await kv.history(key)]


async def test_kv_writes_retried_after_a_lost_ack_add_one_revision(bus: Bus) -> None:
    kv = await bus.js.key_value(bus.names.control_bucket)
    faults = ack_lost_once(bus.js, "publish")
    first = await kv_put(kv, "a", b"1")
    assert faults == ["ack lost"]
    assert await revisions(kv, "a") == [b"1"]

    faults = ack_lost_once(bus.js, "publish")
    second = await kv_update(kv, "a", b"2", last=first)  # refused on retry: its own write was stored
    assert faults == ["ack lost"] and second > first
    assert await revisions(kv, "a") == [b"1", b"2"]
    assert (await kv.get("a")).revision == second

    faults = ack_lost_once(bus.js, "publish")
    created = await kv_create(kv, "b", b"new")
    assert faults == ["ack lost"] and (await kv.get("b")).revision == created
    with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):  # a real conflict still is one
        await kv_update(kv, "a", b"3", last=first)


async def test_events_retried_after_lost_acks_are_stored_once_each(bus: Bus) -> None:
    pipeline = pipeline_for(bus.nc)  # events and checkpoints are pipelined publishes
    real = pipeline.publish
    sent = 0

    async def flaky(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal sent
        sent += 1
        future = await real(*args, **kwargs)
        if sent % 3 == 0:  # stored, but the ack says the stream had no leader
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(nats.js.errors.NoStreamResponseError())
            return failed
        return future

    pipeline.publish = flaky  # type: ignore[method-assign]
    publisher = EventPublisher(bus, "t-lost")
    for i in range(30):
        await publisher.emit(TokenEvent(task_id="t-lost", node_id="a", text=str(i)))
    await publisher.flush()
    stored = [e async for _, e in read_events(bus, "t-lost", follow=False)]
    assert [e.n for e in stored] == list(range(1, 31))
    assert [e.text for e in stored] == [str(i) for i in range(30)]


async def test_an_event_whose_ack_never_comes_is_not_overtaken_by_later_ones(bus: Bus) -> None:
    """Events 3 and 4 go to a leader that dies: no ack, no error. Had the later events been sent
    on, the next leader would store them first; the publisher settles the overdue ones first."""
    pipeline = pipeline_for(bus.nc)  # events and checkpoints are pipelined publishes
    real = pipeline.publish
    sent = 0

    async def lost(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal sent
        sent += 1
        if sent in (3, 4):
            return asyncio.get_running_loop().create_future()  # never resolved, never stored
        return await real(*args, **kwargs)

    pipeline.publish = lost  # type: ignore[method-assign]
    publisher = EventPublisher(bus, "t-stalled", stall_s=0.0)  # any outstanding ack is overdue
    for i in range(10):
        await publisher.emit(TokenEvent(task_id="t-stalled", node_id="a", text=str(i)))
    await publisher.flush()
    stored = [e async for _, e in read_events(bus, "t-stalled", follow=False)]
    assert [e.n for e in stored] == list(range(1, 11)), "stored in n order"


async def test_an_event_lost_in_a_replaced_connection_is_not_overtaken(bus: Bus) -> None:
    """Event 3 dies in the socket of a connection that is then replaced (a NATS node died and
    the client reconnected to another): the events after it are sent on the new connection only
    once it is stored, however soon after the reconnect they come."""
    pipeline = pipeline_for(bus.nc)  # events and checkpoints are pipelined publishes
    real = pipeline.publish
    sent = 0

    async def lost(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal sent
        sent += 1
        if sent == 3:
            bus.nc.stats["reconnects"] += 1  # what the client counts when it reconnects
            return asyncio.get_running_loop().create_future()  # never resolved, never stored
        return await real(*args, **kwargs)

    pipeline.publish = lost  # type: ignore[method-assign]
    publisher = EventPublisher(bus, "t-reconnected", stall_s=3600.0)  # no ack is overdue here
    for i in range(10):
        await publisher.emit(TokenEvent(task_id="t-reconnected", node_id="a", text=str(i)))
    await publisher.flush()
    stored = [e async for _, e in read_events(bus, "t-reconnected", follow=False)]
    assert [e.n for e in stored] == list(range(1, 11)), "stored in n order"


async def test_a_checkpoint_that_failed_never_lands_over_a_newer_one(bus: Bus) -> None:
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    store = KVCheckpointStore(kv)
    pipeline = pipeline_for(bus.nc)  # events and checkpoints are pipelined publishes
    real = pipeline.publish
    calls = 0

    async def first_lost(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal calls
        calls += 1
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if calls == 1:  # never reached the stream
            failed.set_exception(nats.errors.TimeoutError())
            return failed
        return await real(*args, **kwargs)

    pipeline.publish = first_lost  # type: ignore[method-assign]
    await store.save(Checkpoint(task_id="t-cp", event_n=1))
    await store.save(Checkpoint(task_id="t-cp", event_n=2))
    await store.flush()
    loaded = await store.load("t-cp")
    assert loaded is not None and loaded.event_n == 2


async def test_a_stored_checkpoint_whose_ack_was_lost_is_followed_by_the_newest(bus: Bus) -> None:
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    store = KVCheckpointStore(kv)
    pipeline = pipeline_for(bus.nc)  # events and checkpoints are pipelined publishes
    real = pipeline.publish
    calls = 0

    async def faulty(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal calls
        calls += 1
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        failed.set_exception(nats.js.errors.NoStreamResponseError())
        if calls == 1:  # stored, ack lost
            await real(*args, **kwargs)
        return failed  # the second one never reached the stream

    pipeline.publish = faulty  # type: ignore[method-assign]
    await store.save(Checkpoint(task_id="t-cp2", event_n=1))
    await store.save(Checkpoint(task_id="t-cp2", event_n=2))
    await store.flush()
    loaded = await store.load("t-cp2")
    assert loaded is not None and loaded.event_n == 2


async def test_after_a_reconnect_lost_acks_are_not_waited_for_one_by_one(
        bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events and a checkpoint sent on a connection that dies (its node froze: no reset, the
    client reconnects when its pings go unanswered) have no ack to come. They are sent again at
    once: waiting out the ack timeout for each in turn stood a task still 2 s per event."""
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    store = KVCheckpointStore(kv)
    pipeline = pipeline_for(bus.nc)
    real, real_settled = pipeline.publish, events_module.settled
    lost: list[asyncio.Future[Any]] = []

    async def into_a_dead_socket(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        if bus.reconnects:
            return await real(*args, **kwargs)
        lost.append(asyncio.get_running_loop().create_future())  # never sent, never answered
        return lost[-1]

    pipeline.publish = into_a_dead_socket  # type: ignore[method-assign]
    publisher = EventPublisher(bus, "t-frozen", stall_s=3600.0)
    for i in range(3):
        await publisher.emit(TokenEvent(task_id="t-frozen", node_id="a", text=str(i)))
    await store.save(Checkpoint(task_id="t-frozen", event_n=3))
    assert len(lost) == 4
    await bus.nc.force_reconnect()
    await eventually(lambda: _reconnected(bus))

    async def no_wait(ack: asyncio.Future[Any], timeout_s: float = ACK_TIMEOUT_S) -> Any:
        if any(ack is gone for gone in lost):
            assert timeout_s == 0, "waited for an ack due on the replaced connection"
        return await real_settled(ack, timeout_s)

    monkeypatch.setattr(events_module, "settled", no_wait)
    monkeypatch.setattr(checkpoints_module, "settled", no_wait)
    await publisher.emit(TokenEvent(task_id="t-frozen", node_id="a", text="3"))
    await publisher.flush()
    await store.flush()
    stored = [e async for _, e in read_events(bus, "t-frozen", follow=False)]
    assert [e.text for e in stored] == ["0", "1", "2", "3"] and [e.n for e in stored] == [1, 2, 3, 4]
    loaded = await store.load("t-frozen")
    assert loaded is not None and loaded.event_n == 3


async def _reconnected(bus: Bus) -> bool:
    return bus.reconnects > 0 and bus.connected


async def test_lost_acks_are_waited_for_from_when_they_were_sent_not_one_after_the_other(
        bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that froze took three events with it (their acks never come, and nothing tells
    the client). Settling them in turn, each may be waited for until ACK_TIMEOUT_S after it was
    *sent*: once the first has been waited out, the others are sent again at once — waiting
    ACK_TIMEOUT_S for each in turn stood the task still for 2 s per event after the election."""
    now = [time.monotonic()]
    clock = SimpleNamespace(monotonic=lambda: now[0])
    monkeypatch.setattr(events_module, "time", clock)
    monkeypatch.setattr(pipelined_module, "time", clock)
    pipeline = pipeline_for(bus.nc)
    real, real_settled = pipeline.publish, events_module.settled
    lost: list[asyncio.Future[Any]] = []

    async def to_a_frozen_leader(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        if len(lost) < 3:
            lost.append(asyncio.get_running_loop().create_future())  # taken, never answered
            return lost[-1]
        return await real(*args, **kwargs)

    waits: list[float] = []

    async def recorded(ack: asyncio.Future[Any], timeout_s: float = ACK_TIMEOUT_S) -> Any:
        waits.append(timeout_s)
        return await real_settled(ack, timeout_s)

    pipeline.publish = to_a_frozen_leader  # type: ignore[method-assign]
    monkeypatch.setattr(events_module, "settled", recorded)
    publisher = EventPublisher(bus, "t-froze", stall_s=3600.0)
    for i in range(3):
        await publisher.emit(TokenEvent(task_id="t-froze", node_id="a", text=str(i)))
    now[0] += ACK_TIMEOUT_S  # as long as the first of them is waited for
    await publisher.flush()
    assert waits == [0.0, 0.0, 0.0]
    stored = [e async for _, e in read_events(bus, "t-froze", follow=False)]
    assert [e.n for e in stored] == [1, 2, 3]
