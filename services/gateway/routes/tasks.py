"""Task routes: submit (and submit-and-follow), read, list, cancel, approve, retry."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from services.gateway.deps import BusDep, CurrentUser, DatabaseDep, MaybeBusDep
from services.gateway.pagination import Cursor, Limit, Page
from services.gateway.problems import ApiProblem
from services.gateway.runs import approvals as task_approvals
from services.gateway.runs import submit as svc
from services.gateway.runs import views
from services.gateway.runs.stream import NewRunFeed, task_stream
from services.gateway.triggers import deliveries
from services.gateway.triggers.callbacks import check_webhook
from shared.contract.task import TERMINAL, TaskStatus

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"])
STATUSES = frozenset(TaskStatus.__args__)  # type: ignore[attr-defined]


@router.post("", status_code=202, responses={422: {"description": "invalid workflow (every error)"}})
async def submit(
    body: svc.SubmitTask,
    request: Request,
    user: CurrentUser,
    db: DatabaseDep,
    bus: MaybeBusDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    grey = list(getattr(request.state, "guardrail_grey", None) or [])
    await check_webhook(request.app.state.settings, body.webhook)
    task, created, queued = await svc.submit(db, bus, user, body, idempotency_key, grey)
    request.state.audit_target = f"task_id={task.id}"
    return JSONResponse(svc.accepted(task, queued) | {"created": created}, status_code=202)


@router.post("/stream", responses={
    200: {"content": {"text/event-stream": {}}, "description": "the task's events from its first (as GET …/events)"},
    202: {"description": "the task is kept but could not be queued (the message bus is down): as POST /tasks"},
    422: {"description": "invalid workflow (every error)"},
})  # fmt: skip
async def submit_and_stream(
    body: svc.SubmitTask,
    request: Request,
    user: CurrentUser,
    db: DatabaseDep,
    bus: MaybeBusDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    """Submit a task and follow it in one request: what `POST /tasks` and then `GET
    /tasks/{id}/events` do, one round trip and one authorisation fewer."""
    grey = list(getattr(request.state, "guardrail_grey", None) or [])
    await check_webhook(request.app.state.settings, body.webhook)
    new_feed = NewRunFeed(request.app.state.run_feeds)  # reads the task's events from before it is queued
    try:
        task, created, queued = await svc.submit(db, bus, user, body, idempotency_key, grey, new_feed.open)
        request.state.audit_target = f"task_id={task.id}"
        if bus is None or not queued:
            return JSONResponse(svc.accepted(task, queued) | {"created": created}, status_code=202)
        headers = {"Agentix-Task-Id": task.id, "Content-Location": views.links(task.id)["self"]}
        response = task_stream(request.app.state, bus, task.id, 0, None, task.status in TERMINAL, headers=headers)
        new_feed.handed_over()
        return response
    finally:
        new_feed.release()


@router.get("", response_model=Page)
async def list_tasks(
    user: CurrentUser,
    db: DatabaseDep,
    status: Annotated[str | None, Query(description="comma-separated states")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page:
    statuses = [s.strip() for s in status.split(",") if s.strip()] if status else None
    unknown = sorted(set(statuses or []) - STATUSES)
    if unknown:
        raise ApiProblem(422, "Invalid request", f"Unknown status {', '.join(unknown)}.")
    return await db.run(views.list_tasks, user, statuses, limit, cursor)


@router.get("/{task_id}")
async def get_task(task_id: str, request: Request, user: CurrentUser, db: DatabaseDep,
                   bus: MaybeBusDep) -> dict[str, Any]:
    return await views.current_task_view(db, bus, request.app.state.record_watch, user, task_id)


@router.get("/{task_id}/deliveries")
async def task_deliveries(task_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    """The task's completion callbacks (one per run), as `GET /api/v1/callbacks?task_id=`."""
    await db.run(views.load_owned, user, task_id)
    return {"items": await db.run(deliveries.list_deliveries, user, task_id, None, 100)}


@router.post("/{task_id}/cancel", status_code=202, responses={409: {"description": "already ended"}})
async def cancel(task_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    await svc.cancel(db, bus, user, task_id)
    return {"id": task_id, "status": "cancelling", "links": views.links(task_id)}


@router.post("/{task_id}/approval", status_code=202, responses={409: {"description": "not waiting"}})
async def approval(task_id: str, body: task_approvals.Approval, user: CurrentUser, db: DatabaseDep,
                   bus: BusDep) -> dict[str, Any]:
    node_id = await task_approvals.approve(db, bus, user, task_id, body)
    return {"id": task_id, "node_id": node_id, "decision": body.decision, "links": views.links(task_id)}


@router.post("/{task_id}/retry", status_code=202, responses={409: {"description": "not failed/timeout"}})
async def retry(task_id: str, user: CurrentUser, db: DatabaseDep, bus: MaybeBusDep) -> dict[str, Any]:
    task, queued = await svc.retry(db, bus, user, task_id)
    return svc.accepted(task, queued) | {"retry": task.retry}
