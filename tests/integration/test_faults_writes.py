"""A write whose ack is lost (the leader died after storing it) or that was never stored is retried
without a trace: one revision per KV write, each event `n` once, and never an older checkpoint
over a newer one. The faults are made at the client: its publish stores and then reports a
failure, or reports a failure without sending."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
import nats.js.errors
import pytest

from services.dispatcher.checkpoints_kv import KVCheckpointStore
from services.dispatcher.engine.checkpoint import Checkpoint
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events
from shared.bus.kv import kv_create, kv_put, kv_update
from shared.contract.events import TokenEvent

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
    real = bus.js.publish_async
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

    bus.js.publish_async = flaky  # type: ignore[method-assign]
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
    real = bus.js.publish_async
    sent = 0

    async def lost(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal sent
        sent += 1
        if sent in (3, 4):
            return asyncio.get_running_loop().create_future()  # never resolved, never stored
        return await real(*args, **kwargs)

    bus.js.publish_async = lost  # type: ignore[method-assign]
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
    real = bus.js.publish_async
    sent = 0

    async def lost(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal sent
        sent += 1
        if sent == 3:
            bus.nc.stats["reconnects"] += 1  # what the client counts when it reconnects
            return asyncio.get_running_loop().create_future()  # never resolved, never stored
        return await real(*args, **kwargs)

    bus.js.publish_async = lost  # type: ignore[method-assign]
    publisher = EventPublisher(bus, "t-reconnected", stall_s=3600.0)  # no ack is overdue here
    for i in range(10):
        await publisher.emit(TokenEvent(task_id="t-reconnected", node_id="a", text=str(i)))
    await publisher.flush()
    stored = [e async for _, e in read_events(bus, "t-reconnected", follow=False)]
    assert [e.n for e in stored] == list(range(1, 11)), "stored in n order"


async def test_a_checkpoint_that_failed_never_lands_over_a_newer_one(bus: Bus) -> None:
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    store = KVCheckpointStore(kv)
    real = bus.js.publish_async
    calls = 0

    async def first_lost(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal calls
        calls += 1
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if calls == 1:  # never reached the stream
            failed.set_exception(nats.errors.TimeoutError())
            return failed
        return await real(*args, **kwargs)

    bus.js.publish_async = first_lost  # type: ignore[method-assign]
    await store.save(Checkpoint(task_id="t-cp", event_n=1))
    await store.save(Checkpoint(task_id="t-cp", event_n=2))
    await store.flush()
    loaded = await store.load("t-cp")
    assert loaded is not None and loaded.event_n == 2


async def test_a_stored_checkpoint_whose_ack_was_lost_is_followed_by_the_newest(bus: Bus) -> None:
    kv = await bus.js.key_value(bus.names.checkpoints_bucket)
    store = KVCheckpointStore(kv)
    real = bus.js.publish_async
    calls = 0

    async def faulty(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        nonlocal calls
        calls += 1
        failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        failed.set_exception(nats.js.errors.NoStreamResponseError())
        if calls == 1:  # stored, ack lost
            await real(*args, **kwargs)
        return failed  # the second one never reached the stream

    bus.js.publish_async = faulty  # type: ignore[method-assign]
    await store.save(Checkpoint(task_id="t-cp2", event_n=1))
    await store.save(Checkpoint(task_id="t-cp2", event_n=2))
    await store.flush()
    loaded = await store.load("t-cp2")
    assert loaded is not None and loaded.event_n == 2
