"""One read of a live task's event log per gateway, fanned out to all of its SSE clients.

The first client of a live task opens a feed: ONE ordered consumer on the task's log from its
start (every channel) whose events are kept in memory in stream-sequence order, each with its
SSE frame encoded once. Every client of the task — from the first to a late joiner resuming
after any id — reads the same list by position, so it gets exactly the events after its
resume point, in order, without a consumer or a queue of its own: a slow client only lags
behind in the list. JetStream consumers therefore grow with the tasks watched, not with the
clients (the server caps consumers; one per client cut streams at ~1,000 clients).

A task the gateway has just created and is about to queue (`POST /tasks/stream`) needs no
consumer at all: its feed subscribes to the events as the stream republishes them once stored
(`P.live.<task>.>`, each with its stream sequence), before the task is published, so it cannot
miss the first. Each event must be the next of the task's numbering (`n`); one that is not
(a message lost to a reconnect or a slow subscriber), or a quiet spell while the stream holds
more than the feed, turns the feed into the consumer read above from its last event on.

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
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from services.gateway import sse_frames
from services.gateway.tables import Task
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.events import READER_HEARTBEAT_S, read_events, reader_js
from shared.bus.retry import with_retries
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
# A live feed quiet this long asks the stream whether it holds an event the feed has not seen.
LIVE_CHECK_S = 5.0


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

    def __init__(self, bus: Bus, task_id: str, max_bytes: int, *, read: bool = True) -> None:
        self.bus = bus
        self.task_id = task_id
        self.max_bytes = max_bytes
        self.entries: list[_Entry] = []
        self.base = 0  # the position (from the log's start) of entries[0]
        self.dropped_seq = 0  # the stream sequence of the newest event dropped for the cap (0: none)
        self.last_seq = 0  # the stream sequence of the newest event added (0: none yet)
        self.size = 0
        self.clients = 0
        self.reserved = False  # one of `clients` is held for the response the feed was opened for
        self.ended = False  # nothing more will be added: `done` was read, or the feed stopped
        self.complete = False  # it read the log up to `done`
        self.error: BaseException | None = None
        self._grown = asyncio.Event()
        self._unannounced = 0
        self._flush: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        # The live read (`new_task`): the task's `n` of the last event added, and how it ended
        # (None: `done` was read; a stream sequence: the stream read goes on after it).
        self._live_n = 0
        self._live_end: asyncio.Future[int | None] = self._loop.create_future()
        self.pump: asyncio.Task[None] | None = None
        if read:
            self._start(self._read())

    def _start(self, reader: Coroutine[Any, Any, None]) -> None:
        # Named as a client's own reader is (`batched`): whatever watches a task's readers sees it.
        self.pump = asyncio.create_task(reader, name=f"sse-{self.task_id}")

    @classmethod
    async def new_task(cls, bus: Bus, task_id: str, max_bytes: int) -> TaskFeed:
        """The feed of a task not yet queued, reading its events live from the first; returns
        once subscribed (publish the task after)."""
        feed = cls(bus, task_id, max_bytes, read=False)
        sub = await bus.nc.subscribe(bus.subjects.live(task_id), cb=feed._live_received)
        feed._start(feed._follow_live(sub))
        return feed

    async def _live_received(self, msg: Msg) -> None:
        """Adds the task's next event; anything else ends the live read."""
        end = self._live_end
        if end.done():
            return
        try:
            seq, event = int((msg.headers or {})["Nats-Sequence"]), parse_event(msg.data)
        except (KeyError, ValueError) as exc:
            log.warning("the live feed of %s read an unreadable event: %s", self.task_id, exc)
            end.set_result(self.last_seq)
            return
        if event.n != self._live_n + 1 or seq <= self.last_seq:
            end.set_result(self.last_seq)  # one was missed (or repeated): the stream has them all
            return
        self._live_n = event.n
        self._append(_Entry(seq, event.channel, event, sse_frames.frame(seq, event)))
        if event.type == "done":
            end.set_result(None)

    async def _follow_live(self, sub: Subscription) -> None:
        """The live read, until `done`; on anything amiss, the stream read after the last event
        added. A quiet spell ends it too when the stream holds more than the feed (an event lost
        where no later one shows the gap: the last)."""
        try:
            checked = self.last_seq  # where the feed was at the last look: no progress since is quiet
            while True:
                try:
                    resume = await asyncio.wait_for(asyncio.shield(self._live_end), LIVE_CHECK_S)
                    break
                except TimeoutError:
                    if self.last_seq == checked and await self._stream_is_ahead():
                        resume = self.last_seq
                        break
                    checked = self.last_seq
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("the live feed of %s failed: %s", self.task_id, exc)
            resume = self.last_seq
        finally:
            if not self._live_end.done():
                self._live_end.set_result(self.last_seq)  # whatever the subscription still holds is dropped
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        if resume is None:
            self.complete = self.ended = True
            self._announce()
            return
        log.info("the live feed of %s goes on from the stream after sequence %d", self.task_id, resume)
        await self._read(after=resume)

    async def _stream_is_ahead(self) -> bool:
        try:
            names, subjects = self.bus.names, self.bus.subjects
            last = await reader_js(self.bus).get_last_msg(names.events_stream, subjects.events_all(self.task_id))
        except NotFoundError:
            return False
        return (last.seq or 0) > self.last_seq

    async def _read(self, after: int = 0) -> None:
        """The task's log after stream sequence `after` (every channel) until `done`. Read with a
        callback, not `read_events`: its `next_msg` costs a few loop turns per message, so a feed
        read that way lags behind a loop busy writing to thousands of clients and then wakes them
        once per event; the callback appends every message already received in one turn."""
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

        def start() -> ConsumerConfig:  # a new one per try: the client writes its deliver subject into it
            if after:
                return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1)
            return ConsumerConfig(deliver_policy=DeliverPolicy.ALL)

        try:
            # Through an election of the stream (or of the meta group): a feed that falls back to
            # the stream read then, or opens then, waits for a leader instead of failing its clients.
            sub = await with_retries(lambda: reader_js(bus).subscribe(
                bus.subjects.events_all(self.task_id), cb=received, ordered_consumer=True,
                idle_heartbeat=READER_HEARTBEAT_S,
                config=start(), stream=bus.names.events_stream,
            ), what=f"reading the events of {self.task_id}")  # fmt: skip
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
        self.last_seq = entry.seq
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


class NewTaskFeed:
    """The feed one request opens for the task it creates (`open`, run before the task is
    queued), let go on `release` unless `handed_over` to the request's response first."""

    def __init__(self, feeds: TaskFeeds | None) -> None:
        self.feeds = feeds
        self._held: str | None = None

    async def open(self, task: Task) -> None:
        if self.feeds is not None and self.feeds.bus.connected:
            await self.feeds.open_for_new_task(task.id)
            self._held = task.id

    def handed_over(self) -> None:
        self._held = None

    def release(self) -> None:
        if self.feeds is not None and self._held is not None:
            self.feeds.release(self._held)
            self._held = None


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
        elif feed.reserved:
            feed.reserved = False  # the response it was opened for (or the first other) takes its place
        else:
            feed.clients += 1
        try:
            async with contextlib.aclosing(feed.follow(after, channels, added)) as bodies:
                async for body in bodies:
                    yield body
        finally:
            # No await here: a gone client's stream is closed from a cancelled scope.
            self._leave(task_id, feed)

    async def open_for_new_task(self, task_id: str) -> None:
        """Before a task this gateway has just created is published: its feed, reading the events
        live from the first, held for the response that will follow it (`frames`) — or let go
        with `release` when there will be none."""
        if self.closed or task_id in self.feeds:
            return
        feed = self.feeds[task_id] = await TaskFeed.new_task(self.bus, task_id, self.max_bytes)
        feed.clients, feed.reserved = 1, True

    def release(self, task_id: str) -> None:
        """The response a feed was opened for will not follow it (the task was not queued)."""
        feed = self.feeds.get(task_id)
        if feed is not None and feed.reserved:
            feed.reserved = False
            self._leave(task_id, feed)

    def _leave(self, task_id: str, feed: TaskFeed) -> None:
        feed.clients -= 1
        if feed.clients == 0:
            if self.feeds.get(task_id) is feed:
                del self.feeds[task_id]
            self._stop(feed)

    def _stop(self, feed: TaskFeed) -> None:
        if feed.pump is None or feed.pump.done():
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
