"""One read of a live run's event log per gateway, fanned out to every client of the run,
whatever protocol it streams in (the translators of `frames.py` make each protocol's frames).

The first client of a live run opens a feed: ONE ordered consumer on the run's log from its
start (every channel) whose events are kept in memory in stream-sequence order (`frames.Entry`,
the API's frame encoded once for all). Every client of the run — from the first to a late
joiner resuming after any id — reads the same list by position, so it gets exactly the events
after its resume point, in order, without a consumer or a queue of its own: a slow client only
lags behind in the list. JetStream consumers therefore grow with the runs watched, not with the
clients (the server caps consumers; one per client cut streams at ~1,000 clients).

A task the gateway has just created and is about to queue (`POST /tasks/stream`) needs no
consumer at all: its feed subscribes to the events as the stream republishes them once stored
(`P.live.<task>.>`, each with its stream sequence), before the task is published, so it cannot
miss the first. Each event must be the next of the task's numbering (`n`); one that is not
(a message lost to a reconnect or a slow subscriber), or a quiet spell while the stream holds
more than the feed, turns the feed into the consumer read above from its last event on.

A feed keeps at most `max_bytes`; past that its oldest events are dropped, and a client that
needs one of them reads from the stream with its own `read_events` until it is back inside
what the feed keeps, then rejoins it. A feed ends after the run's `done` (each client gets
everything up to and including it, then ends) and is dropped when its last client leaves.
A client that has every event stored so far while the run goes on is told so (an empty batch):
a parked run ends the streams of protocols that cannot answer its approval.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from services.gateway.runs.frames import BATCH, FLUSH_S, Entry, batched
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.events import READER_HEARTBEAT_S, read_events, reader_js
from shared.bus.retry import with_retries
from shared.contract.events import parse_event
from shared.errors import AgentixError

log = logging.getLogger("agentix.gateway.feed")

# Per feed (~23,000 token events): a run's whole log is usually far smaller, so a feed
# normally holds it all and every late joiner catches up from memory.
MAX_BYTES = 32 * 1024 * 1024
# What an entry costs besides its event's bytes (the parsed event, the entry, its API frame once
# encoded): ~1,270 bytes for a token event, measured with tracemalloc. Counted so that the cap
# bounds memory, not bytes received.
ENTRY_OVERHEAD = 1_300
# Over the cap, the oldest events are dropped down to this share of it at once, so trimming is
# one list deletion per many events, not one per event.
TRIM_TO = 0.75
# A live feed quiet this long asks the stream whether it holds an event the feed has not seen.
LIVE_CHECK_S = 5.0
Batches = AsyncGenerator[list[Entry], None]


class FeedFailed(AgentixError, RuntimeError):
    """The feed's consumer failed: its clients' streams end with this error (as a client's own
    reader failing did), and the next client of the run opens a new feed."""

    code = "event_feed_failed"
    http_status = 503


@dataclass(slots=True)
class _Cursor:
    """Where one client is: the stream sequence of the last event it passed."""

    last: int
    rejoin: bool = False  # its own reader stopped because the feed holds what comes next


class RunFeed:
    """One run's events as read once by this gateway (see the module docstring)."""

    def __init__(self, bus: Bus, run_id: str, max_bytes: int, *, read: bool = True) -> None:
        self.bus = bus
        self.run_id = run_id
        self.max_bytes = max_bytes
        self.entries: list[Entry] = []
        self.sizes: list[int] = []  # what each entry counts against `max_bytes`
        self.base = 0  # the position (from the log's start) of entries[0]
        self.dropped_seq = 0  # the stream sequence of the newest event dropped for the cap (0: none)
        self.last_seq = 0  # the stream sequence of the newest event added (0: none yet)
        self.at_end = False  # it holds every event stored so far (as the last one read said)
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
        # The live read (`new_run`): the run's `n` of the last event added, and how it ended
        # (None: `done` was read; a stream sequence: the stream read goes on after it).
        self._live_n = 0
        self._live_end: asyncio.Future[int | None] = self._loop.create_future()
        self.pump: asyncio.Task[None] | None = None
        if read:
            self._start(self._read())

    def _start(self, reader: Coroutine[Any, Any, None]) -> None:
        # Named as a client's own reader is (`batched`): whatever watches a run's readers sees it.
        self.pump = asyncio.create_task(reader, name=f"sse-{self.run_id}")

    @classmethod
    async def new_run(cls, bus: Bus, run_id: str, max_bytes: int) -> RunFeed:
        """The feed of a run not yet queued, reading its events live from the first; returns
        once subscribed (publish the run after)."""
        feed = cls(bus, run_id, max_bytes, read=False)
        feed.at_end = True  # nothing is stored yet, and each event arrives as it is stored
        sub = await bus.nc.subscribe(bus.subjects.live(run_id), cb=feed._live_received)
        feed._start(feed._follow_live(sub))
        return feed

    async def _live_received(self, msg: Msg) -> None:
        """Adds the run's next event; anything else ends the live read."""
        end = self._live_end
        if end.done():
            return
        try:
            seq, event = int((msg.headers or {})["Nats-Sequence"]), parse_event(msg.data)
        except (KeyError, ValueError) as exc:
            log.warning("the live feed of %s read an unreadable event: %s", self.run_id, exc)
            end.set_result(self.last_seq)
            return
        if event.n != self._live_n + 1 or seq <= self.last_seq:
            end.set_result(self.last_seq)  # one was missed (or repeated): the stream has them all
            return
        self._live_n = event.n
        self._append(Entry(seq, event), len(msg.data), at_end=True)
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
            log.warning("the live feed of %s failed: %s", self.run_id, exc)
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
        log.info("the live feed of %s goes on from the stream after sequence %d", self.run_id, resume)
        self.at_end = False
        await self._read(after=resume)

    async def _stream_is_ahead(self) -> bool:
        try:
            names, subjects = self.bus.names, self.bus.subjects
            last = await reader_js(self.bus).get_last_msg(names.events_stream, subjects.events_all(self.run_id))
        except NotFoundError:
            return False
        return (last.seq or 0) > self.last_seq

    async def _read(self, after: int = 0) -> None:
        """The run's log after stream sequence `after` (every channel) until `done`. Read with a
        callback, not `read_events`: its `next_msg` costs a few loop turns per message, so a feed
        read that way lags behind a loop busy writing to thousands of clients and then wakes them
        once per event; the callback appends every message already received in one turn."""
        bus = self.bus
        finished: asyncio.Future[None] = self._loop.create_future()

        async def received(msg: Msg) -> None:
            if finished.done():
                return
            try:
                meta, event = msg.metadata, parse_event(msg.data)
            except Exception as exc:
                finished.set_exception(exc)
                return
            self._append(Entry(meta.sequence.stream, event), len(msg.data), at_end=meta.num_pending == 0)
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
                bus.subjects.events_all(self.run_id), cb=received, ordered_consumer=True,
                idle_heartbeat=READER_HEARTBEAT_S,
                config=start(), stream=bus.names.events_stream,
            ), what=f"reading the events of {self.run_id}")  # fmt: skip
            try:
                await finished
                self.complete = True
            finally:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("the event feed of %s failed: %s", self.run_id, exc)
            self.error = exc
        finally:
            self.ended = True
            self._announce()

    def _append(self, entry: Entry, raw_bytes: int, *, at_end: bool) -> None:
        self.entries.append(entry)
        size = 2 * raw_bytes + ENTRY_OVERHEAD  # the event's bytes, then its frame's
        self.sizes.append(size)
        self.last_seq = entry.seq
        self.at_end = at_end
        self.size += size
        if self.size > self.max_bytes:
            self._trim()
        # The batching of `frames.batched`, shared by every client: they are woken when BATCH events
        # are waiting, or FLUSH_S after the first one, and each then reads what is there at once.
        self._unannounced += 1
        if self._unannounced >= BATCH:
            self._announce()
        elif self._flush is None:
            self._flush = self._loop.call_later(FLUSH_S, self._announce)

    def _trim(self) -> None:
        target = int(self.max_bytes * TRIM_TO)
        cut = 0
        while self.size > target and cut < len(self.entries):
            self.size -= self.sizes[cut]
            cut += 1
        self.dropped_seq = self.entries[cut - 1].seq
        del self.entries[:cut]
        del self.sizes[:cut]
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

    async def follow(self, after: int) -> Batches:
        """The entries after stream sequence `after`, in batches, until `done`; an empty batch
        each time the client has caught up with every event stored so far."""
        cursor = _Cursor(after)
        told = False  # the client was told it caught up, and nothing came since
        while True:
            pos = self.position_after(cursor.last)
            if pos is None:
                async with contextlib.aclosing(batched(self._own(cursor), f"sse-{self.run_id}")) as own:
                    async for batch in own:
                        yield batch
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
                            raise FeedFailed(f"the event feed of {self.run_id} failed") from self.error
                        return  # the feed was stopped (the gateway is shutting down)
                    if self.at_end and not told:
                        told = True
                        yield []
                        continue
                    await self._grown.wait()
                    continue
                batch = [e for e in self.entries[k:k + BATCH] if e.seq > cursor.last]
                pos += min(BATCH, len(self.entries) - k)
                if not batch:
                    continue  # it joined a feed still catching up to its resume point
                cursor.last = batch[-1].seq
                told = False
                done = next((i for i, e in enumerate(batch) if e.event.type == "done"), None)
                if done is not None:
                    yield batch[:done + 1]
                    return
                yield batch

    async def _own(self, cursor: _Cursor) -> AsyncIterator[Entry]:
        """A client's own read from the stream, for events the feed no longer holds; it stops
        as soon as the feed holds everything after the last event read (`cursor.rejoin`)."""
        cursor.rejoin = False
        async for seq, event in read_events(self.bus, self.run_id, after_seq=cursor.last):
            cursor.last = seq
            yield Entry(seq, event)
            if event.type == "done":
                return
            # A feed that stopped short (failed, or the gateway is stopping) is not rejoined.
            if seq >= self.dropped_seq and (self.complete or not self.ended):
                cursor.rejoin = True
                return


class RunFeeds:
    """The gateway's feeds, one per live run that has clients (see the module docstring)."""

    def __init__(self, bus: Bus, max_bytes: int = MAX_BYTES) -> None:
        self.bus = bus
        self.max_bytes = max_bytes
        self.feeds: dict[str, RunFeed] = {}
        self.closed = False
        self._stopping: set[asyncio.Task[None]] = set()

    async def follow(self, run_id: str, after: int) -> Batches:
        """A live run's entries after stream sequence `after` until `done`, in batches (an empty
        one: caught up), from the run's feed."""
        if self.closed:  # the gateway is stopping: no new consumers that nothing would stop
            return
        feed = self.feeds.get(run_id)
        if feed is None or feed.error is not None:
            feed = self.feeds[run_id] = RunFeed(self.bus, run_id, self.max_bytes)
            feed.clients += 1
        elif feed.reserved:
            feed.reserved = False  # the response it was opened for (or the first other) takes its place
        else:
            feed.clients += 1
        try:
            async with contextlib.aclosing(feed.follow(after)) as batches:
                async for batch in batches:
                    yield batch
        finally:
            # No await here: a gone client's stream is closed from a cancelled scope.
            self._leave(run_id, feed)

    async def open_for_new_run(self, run_id: str) -> None:
        """Before a run this gateway has just created is published: its feed, reading the events
        live from the first, held for the response that will follow it (`follow`) — or let go
        with `release` when there will be none."""
        if self.closed or run_id in self.feeds:
            return
        feed = self.feeds[run_id] = await RunFeed.new_run(self.bus, run_id, self.max_bytes)
        feed.clients, feed.reserved = 1, True

    def release(self, run_id: str) -> None:
        """The response a feed was opened for will not follow it (the run was not queued)."""
        feed = self.feeds.get(run_id)
        if feed is not None and feed.reserved:
            feed.reserved = False
            self._leave(run_id, feed)

    def _leave(self, run_id: str, feed: RunFeed) -> None:
        feed.clients -= 1
        if feed.clients == 0:
            if self.feeds.get(run_id) is feed:
                del self.feeds[run_id]
            self._stop(feed)

    def _stop(self, feed: RunFeed) -> None:
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
