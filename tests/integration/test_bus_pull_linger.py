"""A pull loop's linger: after a batch that did not fill, the loop waits before fetching again
(what comes meanwhile is handled together), and a stop ends the wait at once."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from shared.bus import Bus
from shared.bus.pull import PullLoop


async def _consumer(bus: Bus, name: str, subject: str) -> None:
    await bus.js.add_consumer(bus.names.events_stream, ConsumerConfig(
        durable_name=name, filter_subject=subject, ack_policy=AckPolicy.EXPLICIT, ack_wait=30))


async def test_what_comes_during_the_linger_waits_for_it_and_a_stop_ends_it(bus: Bus) -> None:
    subject = bus.subjects.events("t-linger", "exec")
    await _consumer(bus, "linger-test", subject)
    batches: list[list[bytes]] = []
    first, second = asyncio.Event(), asyncio.Event()

    async def handle(msgs: list[Msg]) -> None:
        batches.append([m.data for m in msgs])
        if not first.is_set():
            # Stored before this batch is over: a loop that did not linger would fetch it next.
            await bus.js.publish(subject, b"2")
            first.set()
        else:
            second.set()
        for m in msgs:
            await m.ack()

    loop = PullLoop(bus, bus.names.events_stream, "linger-test", handle, batch=10, linger_s=3600.0)
    await loop.start()
    try:
        await bus.js.publish(subject, b"1")
        await asyncio.wait_for(first.wait(), 10)
        with pytest.raises(TimeoutError):  # fetched at once without the linger; here not for an hour
            await asyncio.wait_for(second.wait(), 1.0)
    finally:
        await asyncio.wait_for(loop.stop(), 10)  # the linger does not hold up a stop
    assert batches == [[b"1"]]

    after = PullLoop(bus, bus.names.events_stream, "linger-test", handle, batch=10)
    await after.start()
    try:
        await asyncio.wait_for(second.wait(), 10)  # nothing was lost
    finally:
        with contextlib.suppress(Exception):
            await after.stop()
    assert batches == [[b"1"], [b"2"]]
