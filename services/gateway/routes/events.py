"""The three SSE endpoints of a task: `/events` (all), `/stream` (tokens), `/exec` (trace).
They differ only in which bus channels they read, so one handler serves all three."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from sse_starlette import EventSourceResponse

from services.gateway.deps import BusDep, CurrentUser, DatabaseDep
from services.gateway.runs.stream import ENDPOINT_CHANNELS, SSE_DOC, resume_point, task_stream
from services.gateway.runs.views import owned_status
from shared.contract.task import TERMINAL

router = APIRouter(prefix="/api/v1/tasks", tags=["streaming"])

LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)]
After = Annotated[str | None, Query(max_length=32, description="resume after this event id")]
# The route names (and so the OpenAPI operation ids and summaries) the endpoints always had.
ROUTE_NAMES = {"events": "events", "stream": "stream", "exec": "exec_trace"}
SseHandler = Callable[..., Awaitable[EventSourceResponse]]


def _handler(endpoint: str) -> SseHandler:
    channels = ENDPOINT_CHANNELS[endpoint]

    async def open_stream(
        task_id: str, request: Request, user: CurrentUser, db: DatabaseDep, bus: BusDep,
        last_event_id: LastEventId = None, after: After = None,
    ) -> EventSourceResponse:  # fmt: skip
        start = resume_point(last_event_id, after)
        status = await db.run(owned_status, user, task_id)
        return task_stream(request.app.state, bus, task_id, start, channels, status in TERMINAL)

    return open_stream


for _endpoint, _name in ROUTE_NAMES.items():
    router.add_api_route(
        f"/{{task_id}}/{_endpoint}", _handler(_endpoint), methods=["GET"], name=_name,
        response_class=EventSourceResponse, responses=SSE_DOC,
    )  # fmt: skip
