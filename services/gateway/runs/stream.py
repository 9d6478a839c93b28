"""Following a run for one client, whatever its protocol: the run's entries — from the gateway's
feed of the run while it goes on (`feed.py`), from the client's own read of the log once it has
ended — made into frames by the client's translator (`frames.py`), written as SSE with the
protocol's keep-alive.

The API's streams (`/api/v1/tasks/{id}/events|stream|exec`, `/api/v1/runs/{id}/events`, an
ingestion job's) are `NativeFrames`: `id` is the stream sequence, so `Last-Event-ID` (or
`?after=`) resumes exactly after the last event the client saw, tokens included."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from services.gateway.problems import ApiProblem
from services.gateway.runs.feed import Batches, RunFeeds
from services.gateway.runs.frames import Added, Entry, NativeFrames, Translator, batched
from services.gateway.tables import Task
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.base import utcnow

PING_S = 5.0  # API.md: a `: ping` comment at least every 10 s (the facades' streams)
HEARTBEAT_S = 10.0  # API.md: a named `heartbeat` event every 10 s (`AGENTIX_SSE_HEARTBEAT_S`)
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

# An SSE route's responses, as its OpenAPI operation shows them.
SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "server-sent events"}
}
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


async def _read(bus: Bus, run_id: str, after: int, channels: Iterable[str] | None, live: bool) -> AsyncIterator[Entry]:
    """The run's log after `after`: up to what is stored for an ended run (nothing more will
    come), until its `done` for a live one."""
    async for seq, event in read_events(bus, run_id, after_seq=after, channels=channels, follow=live):
        yield Entry(seq, event)


def run_entries(state: Any, bus: Bus, run_id: str, after: int, live: bool,
                channels: Iterable[str] | None = None) -> Batches:
    """The run's entries after stream sequence `after`, in batches, until its `done`: a live
    run's from the gateway's feed of it (`state` is the app's state), an ended run's from a read
    of the log of the client's own (on `channels` only, when given: the others are not sent)."""
    feeds = state.run_feeds
    if live and feeds is not None:
        return feeds.follow(run_id, after)
    return batched(_read(bus, run_id, after, channels, live), f"sse-{run_id}")


async def run_frames(state: Any, bus: Bus, run_id: str, translator: Translator, live: bool, *,
                     channels: Iterable[str] | None = None,
                     before_closing: Callable[[], Awaitable[None]] | None = None) -> AsyncIterator[bytes]:
    """A client's stream of a run: the translator's opening, its frames of each entry until it
    is finished (or the log ends), then — after `before_closing`, when given (e.g. until the
    run's record agrees with what the stream says) — its closing."""
    metrics = state.metrics
    metrics.sse_clients.inc()
    try:
        opening = translator.opening()
        if opening:
            yield opening
        # Closed here, not whenever the garbage collector gets to it: a gone client lets go of its
        # feed (or its reader) at once.
        async with contextlib.aclosing(run_entries(state, bus, run_id, translator.after_seq, live,
                                                   channels)) as batches:  # fmt: skip
            async for batch in batches:
                parts: list[bytes] = []
                if not batch:
                    parts.append(translator.caught_up())
                for entry in batch:
                    parts.append(translator.frames(entry))
                    if translator.finished:
                        break
                body = b"".join(parts)
                if body:
                    yield body
                if translator.finished:
                    break
        if not translator.finished:
            return  # the feed stopped short (the gateway is stopping)
        if before_closing is not None:
            await before_closing()
        closing = translator.closing()
        if closing:
            yield closing
    finally:
        metrics.sse_clients.dec()


class NewRunFeed:
    """The feed one request opens for the run it creates (`open`, run before the run is
    queued), let go on `release` unless `handed_over` to the request's response first."""

    def __init__(self, feeds: RunFeeds | None) -> None:
        self.feeds = feeds
        self._held: str | None = None

    async def open(self, task: Task) -> None:
        if self.feeds is not None and self.feeds.bus.connected:
            await self.feeds.open_for_new_run(task.id)
            self._held = task.id

    def handed_over(self) -> None:
        self._held = None

    def release(self) -> None:
        if self.feeds is not None and self._held is not None:
            self.feeds.release(self._held)
            self._held = None


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


def task_stream(state: Any, bus: Bus, task_id: str, after: int, channels: Iterable[str] | None, finished: bool, *,
                added: Added | None = None, headers: dict[str, str] | None = None) -> EventSourceResponse:
    """The API's SSE of a task, chat run or ingestion job (`state` is the app's state): a finished
    one replays what is left and ends; a live one follows until `done`. A `heartbeat` event goes
    out every `AGENTIX_SSE_HEARTBEAT_S` while the stream is open."""
    frames = run_frames(state, bus, task_id, NativeFrames(after, channels, added), not finished, channels=channels)
    return sse_response(frames, headers, ping_s=state.settings.sse_heartbeat_s, ping=lambda: heartbeat(task_id))
