"""Task events on JetStream: a pipelined publisher that numbers events per task, and a reader
that replays a task's log from any stream sequence and then live-tails it (SSE resume)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Iterable

from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from shared.bus.client import Bus
from shared.contract.events import CHANNELS, AnyEvent, EventBase, parse_event

MAX_PENDING_ACKS = 512


class EventPublisher:
    """Publishes one task's events in order without waiting for each ack (acks are collected
    and checked on `flush`, and at most MAX_PENDING_ACKS are outstanding)."""

    def __init__(self, bus: Bus, task_id: str, start_n: int = 0) -> None:
        self.bus = bus
        self.task_id = task_id
        self.n = start_n
        self._pending: deque[asyncio.Future] = deque()
        self._lock = asyncio.Lock()

    async def emit(self, event: EventBase) -> EventBase:
        # The lock keeps stream order equal to `n` order when nodes emit concurrently.
        async with self._lock:
            self.n += 1
            if event.task_id != self.task_id:
                event.task_id = self.task_id
            event.stamp(self.n)
            subject = self.bus.subjects.events(self.task_id, event.channel)
            payload = event.model_dump_json(exclude_none=True).encode()
            fut = await self.bus.js.publish_async(subject, payload)
            self._pending.append(fut)
            while len(self._pending) > MAX_PENDING_ACKS:
                await self._pending.popleft()
        return event

    async def flush(self) -> None:
        """Wait until every event emitted so far is stored; raises if any publish failed."""
        while self._pending:
            await self._pending.popleft()


async def last_event(bus: Bus, task_id: str, channel: str) -> AnyEvent | None:
    """The newest event stored on one of a task's channels, or None."""
    try:
        msg = await bus.js.get_last_msg(bus.names.events_stream, bus.subjects.events(task_id, channel))
    except NotFoundError:
        return None
    return parse_event(msg.data) if msg.data else None


async def last_event_n(bus: Bus, task_id: str) -> int:
    """The highest `n` stored for a task, so a new owner continues the numbering."""
    best = 0
    for channel in CHANNELS:
        event = await last_event(bus, task_id, channel)
        if event is not None:
            best = max(best, event.n)
    return best


async def read_events(
    bus: Bus,
    task_id: str,
    after_seq: int = 0,
    channels: Iterable[str] | None = None,
    follow: bool = True,
    idle_timeout_s: float | None = None,
) -> AsyncIterator[tuple[int, AnyEvent]]:
    """Yield `(stream_sequence, event)` for the task's events after `after_seq`.

    With `follow`, keeps tailing until a `done` event; without, stops once caught up.
    `idle_timeout_s` bounds the wait for a next event (TimeoutError), e.g. for a job
    that never started.
    """
    wanted = set(channels) if channels else None
    # The server sends only the channels read (following also needs `status`, where `done` is):
    # a catch-up that skips tokens does not download them all.
    read = sorted(wanted | ({"status"} if follow else set())) if wanted is not None else list(CHANNELS)
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after_seq > 0 else DeliverPolicy.ALL,
        opt_start_seq=after_seq + 1 if after_seq > 0 else None,
        filter_subjects=[bus.subjects.events(task_id, c) for c in read] if len(read) < len(CHANNELS) else None,
    )
    sub = await bus.js.subscribe(
        bus.subjects.events_all(task_id),
        ordered_consumer=True,
        idle_heartbeat=1.0,
        config=config,
        stream=bus.names.events_stream,
    )
    try:
        if not follow and await _nothing_after(bus, task_id, after_seq, read):
            return
        while True:
            msg = await sub.next_msg(timeout=idle_timeout_s if idle_timeout_s else 3600 * 24)
            meta = msg.metadata
            event = parse_event(msg.data)
            channel = msg.subject.rsplit(".", 1)[-1]
            if wanted is None or channel in wanted:
                yield meta.sequence.stream, event
            if follow and event.type == "done":
                return
            if not follow and meta.num_pending == 0:
                return
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _nothing_after(bus: Bus, task_id: str, after_seq: int, channels: Iterable[str]) -> bool:
    last = 0
    for channel in channels:
        try:
            msg = await bus.js.get_last_msg(bus.names.events_stream, bus.subjects.events(task_id, channel))
            last = max(last, msg.seq or 0)
        except NotFoundError:
            continue
    return last <= after_seq
