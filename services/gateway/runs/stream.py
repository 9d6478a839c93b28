"""SSE replay of a task's event log: `id` is the stream sequence, so `Last-Event-ID` (or
`?after=`) resumes exactly after the last event the client saw, tokens included. A live task's
clients read it from the gateway's shared feed of the task (`task_feeds`); a finished task's
replay is each client's own read."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from services.gateway.metrics import GatewayMetrics
from services.gateway.problems import ApiProblem
from services.gateway.runs.feed import TaskFeeds
from services.gateway.runs.frames import Added, batched, frame
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.base import utcnow

PING_S = 5.0  # API.md: a `: ping` comment at least every 10 s (streams of the LangGraph facade)
HEARTBEAT_S = 10.0  # API.md: a named `heartbeat` event every 10 s (`AGENTIX_SSE_HEARTBEAT_S`)
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


async def _frames(
    bus: Bus,
    task_id: str,
    after: int,
    channels: Iterable[str] | None,
    follow: bool,
    metrics: GatewayMetrics | None,
    added: Added | None = None,
    feeds: TaskFeeds | None = None,
) -> AsyncIterator[bytes]:
    async def source() -> AsyncIterator[bytes]:
        async for seq, event in read_events(bus, task_id, after_seq=after, channels=channels, follow=follow):
            yield frame(seq, event)
            extra = added(event) if added is not None else None
            if extra is not None:
                yield frame(None, extra)

    if metrics is not None:
        metrics.sse_clients.inc()
    if follow and feeds is not None:  # the gateway's one read of the live task, batched there
        bodies = feeds.frames(task_id, after, channels, added)
    else:
        bodies = batched(source(), f"sse-{task_id}")
    try:
        async with contextlib.aclosing(bodies):  # a gone client lets go of its feed at once
            async for body in bodies:
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
    feeds: TaskFeeds | None = None,
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    """A finished task replays what is left and ends; a live one follows until `done` (from
    `feeds`, the gateway's shared read of the task, when given). A `heartbeat` event goes out
    every `heartbeat_s` while the stream is open."""
    return sse_response(_frames(bus, task_id, after, channels, not finished, metrics, added, feeds),
                        headers, ping_s=heartbeat_s, ping=lambda: heartbeat(task_id))


def task_stream(state: Any, bus: Bus, task_id: str, after: int, channels: Iterable[str] | None, finished: bool, *,
                added: Added | None = None, headers: dict[str, str] | None = None) -> EventSourceResponse:
    """`event_stream` as the API serves it: with the app's metrics, heartbeat period and task
    feeds (`state` is the app's `state`)."""
    return event_stream(bus, task_id, after, channels, finished, state.metrics, added,
                        state.settings.sse_heartbeat_s, state.task_feeds, headers)
