"""SSE replay of a task's event log: `id` is the stream sequence, so `Last-Event-ID` (or
`?after=`) resumes exactly after the last event the client saw, tokens included."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent

from services.gateway.metrics import GatewayMetrics
from services.gateway.problems import ApiProblem
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.base import utcnow
from shared.contract.events import AnyEvent

PING_S = 5.0  # API.md: a `: ping` comment at least every 10 s (streams of the LangGraph facade)
HEARTBEAT_S = 10.0  # API.md: a named `heartbeat` event every 10 s (`AGENTIX_SSE_HEARTBEAT_S`)
# Frames are written in batches of up to BATCH, gathered for at most FLUSH_S after the first:
# a replay backlog costs a few large writes instead of one per event; live tokens wait ≤ 2 ms.
BATCH = 256
FLUSH_S = 0.002
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

# Which bus channels each SSE endpoint of a task reads (None: every channel).
ENDPOINT_CHANNELS: dict[str, tuple[str, ...] | None] = {
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


# An event the gateway adds to a stream after one of the log's (e.g. a chat run's `error`
# sentence after its failed `status`): it is not in the log, so its frame has no `id`, and a
# client that resumes after the log's event gets it again.
Added = Callable[[AnyEvent], AnyEvent | None]


def frame(seq: int | None, event: AnyEvent) -> bytes:
    # `sse_data()` is one line of JSON: no newline can break the frame.
    numbered = f"id: {seq}\n" if seq is not None else ""
    return f"{numbered}event: {event.type}\ndata: {event.sse_data()}\n\n".encode()


async def batched(frames: AsyncIterator[bytes], name: str) -> AsyncIterator[bytes]:
    """`frames` read ahead by a task of their own and written in small batches (see BATCH / FLUSH_S)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=BATCH * 4)

    async def pump() -> None:
        try:
            async for item in frames:
                await queue.put(item)
        except asyncio.CancelledError:
            raise  # the response is gone: nobody reads an end marker, and a full queue would block it
        except Exception:
            await queue.put(None)  # the end marker: the writer then re-raises this error
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
            body = b"".join(c for c in chunk if c is not None)
            if body:
                yield body
            if ended:
                reader.result()  # re-raise a reader failure instead of ending silently
                return
    finally:
        # sse-starlette closes a gone client's stream by cancelling an anyio scope, which would
        # cancel every await here too: shield the wait so the reader is really gone.
        with anyio.CancelScope(shield=True):
            await cancel_and_wait(reader)


async def _frames(
    bus: Bus,
    task_id: str,
    after: int,
    channels: Iterable[str] | None,
    follow: bool,
    metrics: GatewayMetrics | None,
    added: Added | None = None,
) -> AsyncIterator[bytes]:
    async def source() -> AsyncIterator[bytes]:
        async for seq, event in read_events(bus, task_id, after_seq=after, channels=channels, follow=follow):
            yield frame(seq, event)
            extra = added(event) if added is not None else None
            if extra is not None:
                yield frame(None, extra)

    if metrics is not None:
        metrics.sse_clients.inc()
    try:
        async for body in batched(source(), f"sse-{task_id}"):
            yield body
    finally:
        if metrics is not None:
            metrics.sse_clients.dec()


def sse_response(body: AsyncIterator[bytes], headers: dict[str, str] | None = None, *,
                 ping_s: float = PING_S,
                 ping: Callable[[], ServerSentEvent] = lambda: ServerSentEvent(comment="ping")) -> EventSourceResponse:
    """Frames already encoded, with the API's SSE headers and a keep-alive every `ping_s`
    (`: ping` comments unless the stream says otherwise)."""
    return EventSourceResponse(body, headers={**HEADERS, **(headers or {})}, ping=ping_s, ping_message_factory=ping)


def heartbeat(task_id: str) -> ServerSentEvent:
    """`event: heartbeat` with no `id`: it is not an event of the task's log (never stored, never
    replayed, and a client's Last-Event-ID stays on the last real event). It tells a client whose
    model is quiet that the connection still lives."""
    data = json.dumps({"task_id": task_id, "ts": utcnow().isoformat().replace("+00:00", "Z")})
    return ServerSentEvent(event="heartbeat", data=data)


def event_stream(
    bus: Bus,
    task_id: str,
    after: int,
    channels: Iterable[str] | None,
    finished: bool,
    metrics: GatewayMetrics | None = None,
    added: Added | None = None,
    heartbeat_s: float = HEARTBEAT_S,
) -> EventSourceResponse:
    """A finished task replays what is left and ends; a live one follows until `done`. A
    `heartbeat` event goes out every `heartbeat_s` while the stream is open."""
    return sse_response(_frames(bus, task_id, after, channels, not finished, metrics, added),
                        ping_s=heartbeat_s, ping=lambda: heartbeat(task_id))
