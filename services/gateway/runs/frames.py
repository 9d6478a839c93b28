"""A run's events as a protocol's frames.

Every stream of a run — the API's task and chat SSE, `/lg`, `/v1` — is one read of the run's
event log (`feed.py`) and a **translator**: a pure function from the log's entries, in order, to
that protocol's frames, with its own ids and resume rule. The feed hands each client the entries
after the stream sequence its translator starts from; the translator says what each one makes,
when its stream is over (`finished`), and what closes it. Adding a protocol is a translator and a
route (see `stream.run_frames`).

The API's own frames (`id` = the stream sequence, `event` = the event's type) are encoded once per
entry and shared by every client of the feed (`Entry.native`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from typing import Protocol, TypeVar

import anyio

from shared.aio import cancel_and_wait
from shared.contract.events import AnyEvent

# Entries are handed on in batches of up to BATCH, gathered for at most FLUSH_S after the first:
# a replay backlog costs a few large writes instead of one per event; live tokens wait ≤ 2 ms.
BATCH = 256
FLUSH_S = 0.002
T = TypeVar("T")

# An event the API adds to a stream after one of the log's (e.g. a chat run's `error` sentence
# after its failed `status`): it is not in the log, so its frame has no `id`, and a client that
# resumes after the log's event gets it again.
Added = Callable[[AnyEvent], AnyEvent | None]


def native_frame(seq: int | None, event: AnyEvent) -> bytes:
    # `sse_data()` is one line of JSON: no newline can break the frame.
    numbered = f"id: {seq}\n" if seq is not None else ""
    return f"{numbered}event: {event.type}\ndata: {event.sse_data()}\n\n".encode()


class Entry:
    """One event of a run's log with its stream sequence, as every reader of the run sees it."""

    __slots__ = ("_native", "event", "seq")

    def __init__(self, seq: int, event: AnyEvent) -> None:
        self.seq = seq
        self.event = event
        self._native: bytes | None = None

    @property
    def native(self) -> bytes:
        """The API's frame of this entry, encoded at its first reader (a feed's entries are shared)."""
        if self._native is None:
            self._native = native_frame(self.seq, self.event)
        return self._native


class Translator(Protocol):
    """A run's entries → one protocol's frames. Pure: everything it makes is a function of the
    entries it was given, in order (and of `caught_up`: the reader has every entry stored so far)."""

    @property
    def after_seq(self) -> int:
        """The stream sequence its stream starts after (0: the log's start)."""

    @property
    def finished(self) -> bool:
        """Its stream is over: no entry after this one makes a frame."""

    def opening(self) -> bytes:
        """What its stream starts with, before any entry."""

    def frames(self, entry: Entry) -> bytes:
        """What one entry makes (b"": nothing)."""

    def caught_up(self) -> bytes:
        """What it makes once it has every entry stored so far and the run has not ended (a run
        parked on an approval ends a stream that cannot answer one)."""

    def closing(self) -> bytes:
        """What its stream ends with, once `finished` (or once the run's log ended)."""


class NativeFrames:
    """The API's SSE of a task or chat run: each event as `id: <seq>`, `event: <type>`, from the
    event after `after_seq` (`Last-Event-ID`) on `channels` (None: all), until `done`."""

    def __init__(self, after_seq: int = 0, channels: Iterable[str] | None = None, added: Added | None = None) -> None:
        self._after = after_seq
        self.channels = frozenset(channels) if channels else None
        self.added = added
        self._finished = False

    @property
    def after_seq(self) -> int:
        return self._after

    @property
    def finished(self) -> bool:
        return self._finished

    def opening(self) -> bytes:
        return b""

    def frames(self, entry: Entry) -> bytes:
        event = entry.event
        if event.type == "done":
            self._finished = True
        if self.channels is not None and event.channel not in self.channels:
            return b""
        extra = self.added(event) if self.added is not None else None
        return entry.native if extra is None else entry.native + native_frame(None, extra)

    def caught_up(self) -> bytes:
        return b""

    def closing(self) -> bytes:
        return b""


async def batched(items: AsyncIterator[T], name: str) -> AsyncGenerator[list[T], None]:
    """`items` read ahead by a task of their own and handed on in batches (see BATCH / FLUSH_S)."""
    queue: asyncio.Queue[tuple[T] | None] = asyncio.Queue(maxsize=BATCH * 4)

    async def pump() -> None:
        try:
            async for item in items:
                await queue.put((item,))
        except asyncio.CancelledError:
            raise  # the response is gone: nobody reads an end marker, and a full queue would block it
        except Exception:
            await queue.put(None)  # the end marker: the reader then re-raises this error
            raise
        await queue.put(None)

    loop = asyncio.get_running_loop()
    reader = asyncio.create_task(pump(), name=name)
    try:
        while True:
            chunk = [await queue.get()]
            deadline = loop.time() + FLUSH_S
            while chunk[-1] is not None and len(chunk) < BATCH:
                if not queue.empty():
                    chunk.append(queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(remaining):
                        chunk.append(await queue.get())
                except TimeoutError:
                    break
            ended = chunk[-1] is None
            got = [c[0] for c in chunk if c is not None]
            if got:
                yield got
            if ended:
                reader.result()  # re-raise a reader failure instead of ending silently
                return
    finally:
        # sse-starlette closes a gone client's stream by cancelling an anyio scope, which would
        # cancel every await here too: shield the wait so the reader is really gone.
        with anyio.CancelScope(shield=True):
            await cancel_and_wait(reader)
