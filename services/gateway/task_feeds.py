"""One read of a live task's event log per gateway, fanned out to all of its SSE clients.

The first client of a live task opens a feed: ONE ordered consumer on the task's log from its
start (every channel) whose events are kept in memory in stream-sequence order, each with its
SSE frame encoded once. Every client of the task — from the first to a late joiner resuming
after any id — reads the same list by position, so it gets exactly the events after its
resume point, in order, without a consumer or a queue of its own: a slow client only lags
behind in the list. JetStream consumers therefore grow with the tasks watched, not with the
clients (the server caps consumers; one per client cut streams at ~1,000 clients).

A feed keeps at most `max_bytes`; past that its oldest events are dropped, and a client that
needs one of them reads from the stream with its own `read_events` until it is back inside
what the feed keeps, then rejoins it. A feed ends after the task's `done` (each client gets
everything up to and including it, then ends) and is dropped when its last client leaves.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from services.gateway import sse_frames
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.events import AnyEvent, parse_event
from shared.errors import AgentixError

log = logging.getLogger("agentix.gateway.task_feeds")

# Per feed (~23,000 token events): a task's whole log is usually far smaller, so a feed
# normally holds it all and every late joiner catches up from memory.
MAX_BYTES = 32 * 1024 * 1024
# What an entry costs besides its frame (the parsed event, the entry itself): ~1,270 bytes for
# a token event, measured with tracemalloc. Counted so that the cap bounds memory, not frames.
ENTRY_OVERHEAD = 1_300
# Over the cap, the oldest events are dropped down to this share of it at once, so trimming is
# one list deletion per many events, not one per event.
TRIM_TO = 0.75


class FeedFailed(AgentixError, RuntimeError):
    """The feed's consumer failed: its clients' streams end with this error (as a client's own
    reader failing did), and the next client of the task opens a new feed."""

    code = "event_feed_failed"
    http_status = 503


@dataclass(slots=True)
class _Entry:
    seq: int  # the stream sequence: the frame's `id`
    channel: str
    event: AnyEvent
    frame: bytes


@dataclass(slots=True)
class _Cursor:
    """Where one client is: the stream sequence of the last event it passed (shown or not)."""

    last: int
    rejoin: bool = False  # its own reader stopped because the feed holds what comes next


class TaskFeed:
    """One task's events as read once by this gateway (see the module docstring)."""

    def __init__(self, bus: Bus, task_id: str, max_bytes: int) -> None:
        self.bus = bus
        self.task_id = task_id
        self.max_bytes = max_bytes
        self.entries: list[_Entry] = []
        self.base = 0  # the position (from the log's start) of entries[0]
        self.dropped_seq = 0  # the stream sequence of the newest event dropped for the cap (0: none)
        self.size = 0
        self.clients = 0
        self.ended = False  # nothing more will be added: `done` was read, or the feed stopped
        self.complete = False  # it read the log up to `done`
        self.error: BaseException | None = None
        self._grown = asyncio.Event()
        self._unannounced = 0
        self._flush: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        # Named as a client's own reader is (`batched`): whatever watches a task's readers sees it.
        self.pump = asyncio.create_task(self._read(), name=f"sse-{task_id}")

    async def _read(self) -> None:
        """The task's log from its start (every channel) until `done`. Read with a callback, not
        `read_events`: its `next_msg` costs a few loop turns per message, so a feed read that way
        lags behind a loop busy writing to thousands of clients and then wakes them once per
        event; the callback appends every message already received in one turn."""
        bus = self.bus
        finished: asyncio.Future[None] = self._loop.create_future()

        async def received(msg: Msg) -> None:
            if finished.done():
                return
            try:
                seq, event = msg.metadata.sequence.stream, parse_event(msg.data)
            except Exception as exc:
                finished.set_exception(exc)
                return
            self._append(_Entry(seq, event.channel, event, sse_frames.frame(seq, event)))
            if event.type == "done":
                finished.set_result(None)

        try:
            sub = await bus.js.subscribe(
                bus.subjects.events_all(self.task_id), cb=received, ordered_consumer=True, idle_heartbeat=1.0,
                config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL), stream=bus.names.events_stream,
            )  # fmt: skip
            try:
                await finished
                self.complete = True
            finally:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("the event feed of %s failed: %s", self.task_id, exc)
            self.error = exc
        finally:
            self.ended = True
            self._announce()

    def _append(self, entry: _Entry) -> None:
        self.entries.append(entry)
        self.size += len(entry.frame) + ENTRY_OVERHEAD
        if self.size > self.max_bytes:
            self._trim()
        # The batching of `sse_frames.batched`, shared by every client: they are woken when BATCH events
        # are waiting, or FLUSH_S after the first one, and each then writes what is there at once.
        self._unannounced += 1
        if self._unannounced >= sse_frames.BATCH:
            self._announce()
        elif self._flush is None:
            self._flush = self._loop.call_later(sse_frames.FLUSH_S, self._announce)

    def _trim(self) -> None:
        target = int(self.max_bytes * TRIM_TO)
        cut = 0
        while self.size > target and cut < len(self.entries):
            self.size -= len(self.entries[cut].frame) + ENTRY_OVERHEAD
            cut += 1
        self.dropped_seq = self.entries[cut - 1].seq
        del self.entries[:cut]
        self.base += cut

    def _announce(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._unannounced = 0
        self._grown.set()  # wakes every waiting client; clearing at once does not undo that
        self._grown.clear()

    def position_after(self, seq: int) -> int | None:
        """The position of the first event after stream sequence `seq`; None when the feed
        no longer holds all the events after it (some were dropped for the cap)."""
        if seq < self.dropped_seq:
            return None
        return self.base + bisect.bisect_right(self.entries, seq, key=lambda e: e.seq)

    async def follow(self, after: int, channels: Iterable[str] | None,
                     added: sse_frames.Added | None) -> AsyncGenerator[bytes, None]:  # fmt: skip
        """The frames after stream sequence `after` on `channels` (None: all), in batches,
        until `done`."""
        wanted = frozenset(channels) if channels else None
        cursor = _Cursor(after)
        while True:
            pos = self.position_after(cursor.last)
            if pos is None:
                async with contextlib.aclosing(sse_frames.batched(self._own(cursor, wanted, added),
                                                           f"sse-{self.task_id}")) as own:  # fmt: skip
                    async for body in own:
                        yield body
                if not cursor.rejoin:
                    return  # its own reader read `done`
                continue
            while True:
                k = pos - self.base
                if k < 0:
                    break  # it fell behind what the feed keeps: read on by itself from `cursor.last`
                if k >= len(self.entries):
                    if self.ended:
                        if self.error is not None:
                            raise FeedFailed(f"the event feed of {self.task_id} failed") from self.error
                        return  # the feed was stopped (the gateway is shutting down)
                    await self._grown.wait()
                    continue
                parts: list[bytes] = []
                for entry in self.entries[k:k + sse_frames.BATCH]:
                    pos += 1
                    if entry.seq <= cursor.last:
                        continue  # it joined a feed still catching up to its resume point
                    cursor.last = entry.seq
                    if wanted is None or entry.channel in wanted:
                        parts.append(entry.frame)
                        extra = added(entry.event) if added is not None else None
                        if extra is not None:
                            parts.append(sse_frames.frame(None, extra))
                    if entry.event.type == "done":
                        if parts:
                            yield b"".join(parts)
                        return
                if parts:
                    yield b"".join(parts)

    async def _own(self, cursor: _Cursor, wanted: frozenset[str] | None,
                   added: sse_frames.Added | None) -> AsyncIterator[bytes]:  # fmt: skip
        """A client's own read from the stream, for events the feed no longer holds; it stops
        as soon as the feed holds everything after the last event read (`cursor.rejoin`)."""
        cursor.rejoin = False
        async for seq, event in read_events(self.bus, self.task_id, after_seq=cursor.last, channels=wanted):
            cursor.last = seq
            yield sse_frames.frame(seq, event)
            extra = added(event) if added is not None else None
            if extra is not None:
                yield sse_frames.frame(None, extra)
            if event.type == "done":
                return
            # A feed that stopped short (failed, or the gateway is stopping) is not rejoined.
            if seq >= self.dropped_seq and (self.complete or not self.ended):
                cursor.rejoin = True
                return
        # `read_events` also ends on a `done` the client does not read (another channel's).


class TaskFeeds:
    """The gateway's feeds, one per live task that has clients (see the module docstring)."""

    def __init__(self, bus: Bus, max_bytes: int = MAX_BYTES) -> None:
        self.bus = bus
        self.max_bytes = max_bytes
        self.feeds: dict[str, TaskFeed] = {}
        self.closed = False
        self._stopping: set[asyncio.Task[None]] = set()

    async def frames(self, task_id: str, after: int, channels: Iterable[str] | None,
                     added: sse_frames.Added | None = None) -> AsyncGenerator[bytes, None]:  # fmt: skip
        """A live task's frames after `after` until `done`, in batches, from the task's feed."""
        if self.closed:  # the gateway is stopping: no new consumers that nothing would stop
            return
        feed = self.feeds.get(task_id)
        if feed is None or feed.error is not None:
            feed = self.feeds[task_id] = TaskFeed(self.bus, task_id, self.max_bytes)
        feed.clients += 1
        try:
            async with contextlib.aclosing(feed.follow(after, channels, added)) as bodies:
                async for body in bodies:
                    yield body
        finally:
            # No await here: a gone client's stream is closed from a cancelled scope.
            feed.clients -= 1
            if feed.clients == 0:
                if self.feeds.get(task_id) is feed:
                    del self.feeds[task_id]
                self._stop(feed)

    def _stop(self, feed: TaskFeed) -> None:
        if feed.pump.done():
            return
        # One cancel is not always enough for a reader on nats-py (see `cancel_and_wait`).
        stopping = asyncio.get_running_loop().create_task(cancel_and_wait(feed.pump))
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)

    async def close(self) -> None:
        """Stop every feed (on the gateway's shutdown): their clients' streams end."""
        self.closed = True
        feeds = list(self.feeds.values())
        self.feeds.clear()
        for feed in feeds:
            self._stop(feed)
        while self._stopping:
            await asyncio.wait(list(self._stopping))
