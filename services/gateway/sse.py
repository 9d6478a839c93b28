"""SSE replay of a task's event log: `id` is the stream sequence, so `Last-Event-ID` (or
`?after=`) resumes exactly after the last event the client saw, tokens included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent

from services.gateway.metrics import GatewayMetrics
from services.gateway.problems import ApiProblem
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.events import AnyEvent

PING_S = 5.0  # API.md: a `: ping` comment at least every 10 s
# Frames are written in batches of up to BATCH, gathered for at most FLUSH_S after the first:
# a replay backlog costs a few large writes instead of one per event; live tokens wait ≤ 2 ms.
BATCH = 256
FLUSH_S = 0.002
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

CHANNELS: dict[str, tuple[str, ...] | None] = {
    "events": None,
    "stream": ("token", "status"),
    "exec": ("exec", "status"),
}


def resume_point(last_event_id: str | None, after: str | None) -> int:
    raw = last_event_id if last_event_id not in (None, "") else after
    if raw in (None, ""):
        return 0
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise ApiProblem(400, "Bad Request", "Last-Event-ID / after must be a non-negative integer.") from exc
    if value < 0:
        raise ApiProblem(400, "Bad Request", "Last-Event-ID / after must be a non-negative integer.")
    return value


def frame(seq: int, event: AnyEvent) -> bytes:
    # `sse_data()` is one line of JSON: no newline can break the frame.
    return f"id: {seq}\nevent: {event.type}\ndata: {event.sse_data()}\n\n".encode()


async def _frames(
    bus: Bus,
    task_id: str,
    after: int,
    channels: Iterable[str] | None,
    follow: bool,
    metrics: GatewayMetrics | None,
) -> AsyncIterator[bytes]:
    """Frames in order, written in small batches (see BATCH / FLUSH_S)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=BATCH * 4)

    async def pump() -> None:
        try:
            async for seq, event in read_events(bus, task_id, after_seq=after, channels=channels, follow=follow):
                await queue.put(frame(seq, event))
        except asyncio.CancelledError:
            raise  # the response is gone: nobody reads an end marker, and a full queue would block it
        except Exception:
            await queue.put(None)  # the end marker: the writer then re-raises this error
            raise
        await queue.put(None)

    if metrics is not None:
        metrics.sse_clients.inc()
    loop = asyncio.get_running_loop()
    reader = asyncio.create_task(pump(), name=f"sse-{task_id}")
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
            body = b"".join(c for c in chunk if c is not None)
            if body:
                yield body
            if ended:
                reader.result()  # re-raise a reader failure instead of ending silently
                return
    finally:
        if metrics is not None:
            metrics.sse_clients.dec()
        # sse-starlette closes a gone client's stream by cancelling an anyio scope, which would
        # cancel every await here too: shield the wait so the reader is really gone.
        with anyio.CancelScope(shield=True):
            await cancel_and_wait(reader)


def event_stream(
    bus: Bus,
    task_id: str,
    after: int,
    channels: Iterable[str] | None,
    finished: bool,
    metrics: GatewayMetrics | None = None,
) -> EventSourceResponse:
    """A finished task replays what is left and ends; a live one follows until `done`."""
    return EventSourceResponse(
        _frames(bus, task_id, after, channels, not finished, metrics),
        headers=HEADERS,
        ping=PING_S,
        ping_message_factory=lambda: ServerSentEvent(comment="ping"),
    )
