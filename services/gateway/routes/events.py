"""The three SSE endpoints of a task: `/events` (all), `/stream` (tokens), `/exec` (trace)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse

from services.gateway.deps import BusDep, CurrentUser, DatabaseDep
from services.gateway.sse import CHANNELS, event_stream, resume_point
from services.gateway.tasks import load_owned
from shared.contract.task import TERMINAL

router = APIRouter(prefix="/api/v1/tasks", tags=["streaming"])

SSE_DOC = {200: {"content": {"text/event-stream": {}}, "description": "server-sent events"}}
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)]
After = Annotated[str | None, Query(max_length=32, description="resume after this event id")]


async def _open(
    kind: str, task_id: str, request: Request, user: CurrentUser, db: DatabaseDep, bus: BusDep,
    last_event_id: str | None, after: str | None,
) -> EventSourceResponse:  # fmt: skip
    start = resume_point(last_event_id, after)
    task = await db.run(load_owned, user, task_id)
    return event_stream(bus, task_id, start, CHANNELS[kind], task.status in TERMINAL, request.app.state.metrics)


@router.get("/{task_id}/events", response_class=EventSourceResponse, responses=SSE_DOC)
async def events(
    task_id: str, request: Request, user: CurrentUser, db: DatabaseDep, bus: BusDep,
    last_event_id: LastEventId = None, after: After = None,
) -> EventSourceResponse:  # fmt: skip
    return await _open("events", task_id, request, user, db, bus, last_event_id, after)


@router.get("/{task_id}/stream", response_class=EventSourceResponse, responses=SSE_DOC)
async def stream(
    task_id: str, request: Request, user: CurrentUser, db: DatabaseDep, bus: BusDep,
    last_event_id: LastEventId = None, after: After = None,
) -> EventSourceResponse:  # fmt: skip
    return await _open("stream", task_id, request, user, db, bus, last_event_id, after)


@router.get("/{task_id}/exec", response_class=EventSourceResponse, responses=SSE_DOC)
async def exec_trace(
    task_id: str, request: Request, user: CurrentUser, db: DatabaseDep, bus: BusDep,
    last_event_id: LastEventId = None, after: After = None,
) -> EventSourceResponse:  # fmt: skip
    return await _open("exec", task_id, request, user, db, bus, last_event_id, after)
