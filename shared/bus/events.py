"""Task events on JetStream: a pipelined publisher that numbers events per task (a task's log
is ended by `shared.contract.events.finish_task`), and a reader that replays a task's log from any stream
sequence and then live-tails it (SSE resume)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy, PubAck
from nats.js.errors import NotFoundError

from shared.bus.client import Bus
from shared.bus.pipelined import ack_time_left, connection_number, pipeline_for
from shared.bus.retry import ACK_TIMEOUT_S, is_transient, settled, with_retries
from shared.contract.events import CHANNELS, AnyEvent, EventBase, parse_event

MAX_PENDING_ACKS = 512
# An ack outstanding this long may never come: the event went to a leader that died. Later
# events would be stored by the next leader before it is sent again, out of `n` order, so the
# publisher stops and settles what is outstanding first. Shorter than an election (4–9 s).
STALLED_ACK_S = 1.0
# The server's heartbeat to an idle ordered consumer that reads a task's events: the client makes
# a new consumer after two heartbeats without a message, and at most two more before the next
# try — so this is how soon a reader notices that its consumer died with its node, and how long
# after the meta group's election it asks again.
READER_HEARTBEAT_S = 0.5
_READER_CONTEXTS: weakref.WeakKeyDictionary[Client, JetStreamContext] = weakref.WeakKeyDictionary()


def reader_js(bus: Bus) -> JetStreamContext:
    """The JetStream context that readers of task events make their consumers with: its
    requests — a consumer create, and the client's own re-create of an ordered consumer whose
    node died — are given up on after ACK_TIMEOUT_S, as a write's are, and asked again
    (`with_retries`; the client re-creates at its next missed heartbeat). With the default 5 s,
    a create lost at the moment of an election, or on a connection that was dying, held a
    feed's clients 5 s past it."""
    context = _READER_CONTEXTS.get(bus.nc)
    if context is None:
        context = _READER_CONTEXTS[bus.nc] = bus.nc.jetstream(timeout=ACK_TIMEOUT_S)
    return context


@dataclass
class _Sent:
    """A published event whose ack is outstanding: all it takes to send the same message again."""

    subject: str
    payload: bytes
    msg_id: str
    ack: asyncio.Future[PubAck]
    sent_at: float
    connection: int  # the client's reconnect count when it was sent


class EventPublisher:
    """Publishes one task's events in order without waiting for each ack (acks are collected
    and checked on `flush`, and at most MAX_PENDING_ACKS are outstanding).

    Each event goes out with `Nats-Msg-Id` `<task>:<n>`. An event whose ack fails or never
    comes (a leader election, a reconnect) is published again — the same bytes, the same msg id,
    never renumbered — until stored (`retry.with_retries`), so the log keeps every `n` exactly
    once; a copy that was stored after all is dropped by the stream as a duplicate. Once a
    failure is seen, or an ack is outstanding for `stall_s`, what is outstanding is settled
    before anything new is sent, so a retried event is not overtaken by later ones."""

    def __init__(self, bus: Bus, task_id: str, start_n: int = 0, stall_s: float = STALLED_ACK_S) -> None:
        self.bus = bus
        self.task_id = task_id
        self.n = start_n
        self.stall_s = stall_s
        self._pending: deque[_Sent] = deque()
        self._lock = asyncio.Lock()

    async def emit(self, event: EventBase) -> EventBase:
        # The lock keeps stream order equal to `n` order when nodes emit concurrently.
        async with self._lock:
            if self._troubled():
                await self._settle_all()
            self.n += 1
            if event.task_id != self.task_id:
                event.task_id = self.task_id
            event.stamp(self.n)
            subject = self.bus.subjects.events(self.task_id, event.channel)
            payload = event.model_dump_json(exclude_none=True).encode()
            msg_id = f"{self.task_id}:{self.n}"
            sent_at, connection = time.monotonic(), self._connection()
            ack = await self._send(subject, payload, msg_id)
            self._pending.append(_Sent(subject, payload, msg_id, ack, sent_at, connection))
            while len(self._pending) > MAX_PENDING_ACKS:
                await self._settle(self._pending.popleft())
        return event

    async def flush(self) -> None:
        """Wait until every event emitted so far is stored; raises `BusWriteError` if one could
        not be stored within the retry period (or the error of a write that can never succeed)."""
        async with self._lock:
            await self._settle_all()

    def _troubled(self) -> bool:
        """Disconnected, an earlier event's publish failed, its ack is overdue, or it was sent
        on a connection that has since been replaced (it may have died in the old socket, and
        later events sent on the new one would be stored first): settle before sending more."""
        if not self.bus.nc.is_connected:
            return bool(self._pending)
        while self._pending and self._pending[0].ack.done():
            if self._pending[0].ack.exception() is not None:
                return True
            self._pending.popleft()
        if not self._pending:
            return False
        oldest = self._pending[0]
        return oldest.connection != self._connection() or time.monotonic() - oldest.sent_at >= self.stall_s

    def _connection(self) -> int:
        return connection_number(self.bus.nc)

    async def _send(self, subject: str, payload: bytes, msg_id: str) -> asyncio.Future[PubAck]:
        try:
            return await pipeline_for(self.bus.nc).publish(subject, payload, {"Nats-Msg-Id": msg_id})
        except Exception as exc:  # e.g. a full outbound buffer while reconnecting: settled (retried) like a failed ack
            failed: asyncio.Future[PubAck] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed

    async def _settle_all(self) -> None:
        while self._pending:
            await self._settle(self._pending.popleft())

    async def _settle(self, sent: _Sent) -> None:
        try:
            await settled(sent.ack, ack_time_left(self.bus.nc, sent.sent_at, sent.connection))
            return
        except Exception as exc:
            if not is_transient(exc):
                raise
        await with_retries(
            lambda: self.bus.js.publish(sent.subject, sent.payload, timeout=ACK_TIMEOUT_S,
                                        headers={"Nats-Msg-Id": sent.msg_id}),
            what=f"event {sent.msg_id}", closed=lambda: self.bus.nc.is_closed,
        )




async def last_event(bus: Bus, task_id: str, channel: str | None) -> AnyEvent | None:
    """The newest event stored on one of a task's channels (None: on any of them), or None."""
    subject = bus.subjects.events(task_id, channel) if channel else bus.subjects.events_all(task_id)
    try:
        msg = await with_retries(
            lambda: bus.js.get_last_msg(bus.names.events_stream, subject),
            what=f"reading the last {f'{channel} ' if channel else ''}event of {task_id}",
        )
    except NotFoundError:
        return None
    return parse_event(msg.data) if msg.data else None


async def last_event_n(bus: Bus, task_id: str) -> int:
    """The highest `n` stored for a task, so a new owner continues the numbering: the `n` of its
    last stored event, on whichever channel (a publisher stores a task's events in `n` order).
    One request, not one per channel: every task start asks."""
    event = await last_event(bus, task_id, None)
    return event.n if event is not None else 0


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
    def config() -> ConsumerConfig:  # a new one per try: the client writes its deliver subject into it
        return ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after_seq > 0 else DeliverPolicy.ALL,
            opt_start_seq=after_seq + 1 if after_seq > 0 else None,
            filter_subjects=[bus.subjects.events(task_id, c) for c in read] if len(read) < len(CHANNELS) else None,
        )

    # Created through an election of the stream or of the meta group, as a write is.
    sub = await with_retries(lambda: reader_js(bus).subscribe(
        bus.subjects.events_all(task_id),
        ordered_consumer=True,
        idle_heartbeat=READER_HEARTBEAT_S,
        config=config(),
        stream=bus.names.events_stream,
    ), what=f"reading the events of {task_id}")
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
    # Every channel read (a run's whole log, as an answer's trace reads it): one request for the
    # newest of them all, not one per channel.
    asked = set(channels)
    subjects = [bus.subjects.events_all(task_id)] if asked >= set(CHANNELS) else \
        [bus.subjects.events(task_id, channel) for channel in sorted(asked)]
    last = 0
    for subject in subjects:
        try:
            msg = await bus.js.get_last_msg(bus.names.events_stream, subject)
            last = max(last, msg.seq or 0)
        except NotFoundError:
            continue
    return last <= after_seq
