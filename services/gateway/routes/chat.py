"""Chat routes (thin): conversations, their messages, and runs (a run id is a task id, so its
stream is the task's SSE replay and its approval the task approval path)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from services.gateway.chat import conversations, messages, queue, runs
from services.gateway.chat.answers import error_event
from services.gateway.chat.states import RUN_TERMINAL
from services.gateway.deps import BusDep, CurrentUser, DatabaseDep, MaybeBusDep
from services.gateway.pagination import Cursor, Limit, Page
from services.gateway.routes.events import After, LastEventId
from services.gateway.runs.stream import SSE_DOC, resume_point, task_stream
from services.gateway.triggers.callbacks import check_webhook

router = APIRouter(prefix="/api/v1", tags=["chat"])


@router.post("/conversations", status_code=201)
async def create_conversation(body: conversations.NewConversation, request: Request, user: CurrentUser,
                              db: DatabaseDep) -> dict[str, Any]:
    created = await db.run(conversations.create, user, body)
    request.state.audit_target = f"conversation_id={created['id']}"
    return created


@router.get("/conversations", response_model=Page)
async def list_conversations(user: CurrentUser, db: DatabaseDep, limit: Limit = 50, cursor: Cursor = None) -> Page:
    return await db.run(conversations.list_page, user, limit, cursor)


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(lambda s: conversations.view(conversations.load_owned(s, user, conversation_id)))


@router.patch("/conversations/{conversation_id}")
async def patch_conversation(conversation_id: str, body: conversations.ConversationPatch, user: CurrentUser,
                             db: DatabaseDep) -> dict[str, Any]:
    return await db.run(conversations.patch, user, conversation_id, body)


@router.delete("/conversations/{conversation_id}", status_code=204)
async def delete_conversation(conversation_id: str, user: CurrentUser, db: DatabaseDep,
                              bus: MaybeBusDep) -> Response:
    going, started = await db.run(conversations.remove, user, conversation_id)
    await runs.stop_all(db, bus, user, going, started)
    return Response(status_code=204)


@router.post("/conversations/{conversation_id}/messages", status_code=202,
             responses={409: {"description": "a run is going and multitask=reject"}})
async def post_message(conversation_id: str, body: queue.PostMessage, request: Request, user: CurrentUser,
                       db: DatabaseDep, bus: MaybeBusDep) -> JSONResponse:
    await check_webhook(request.app.state.settings, body.webhook)
    grey = list(getattr(request.state, "guardrail_grey", None) or [])
    accepted = await queue.post_message(db, bus, user, conversation_id, body, grey)
    request.state.audit_target = f"run_id={accepted['run']['id']}"
    return JSONResponse(jsonable_encoder(accepted), status_code=202)


@router.get("/conversations/{conversation_id}/messages", response_model=Page)
async def list_messages(
    conversation_id: str, user: CurrentUser, db: DatabaseDep, limit: Limit = 50, cursor: Cursor = None,
    order: Annotated[Literal["asc", "desc"], Query(description="asc: oldest first (default)")] = "asc",
) -> Page:
    def page(session: Any) -> Page:
        conversation = conversations.load_owned(session, user, conversation_id)
        return messages.list_page(session, conversation.id, limit, cursor, newest_first=order == "desc")

    return await db.run(page)


@router.get("/conversations/{conversation_id}/runs")
async def list_going_runs(conversation_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(runs.going_views, user, conversation_id)


@router.get("/runs/{run_id}")
async def get_run(run_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(runs.run_view, user, run_id)


@router.get("/runs/{run_id}/events", response_class=EventSourceResponse, responses=SSE_DOC)
async def run_events(run_id: str, request: Request, user: CurrentUser, db: DatabaseDep, bus: BusDep,
                     last_event_id: LastEventId = None, after: After = None) -> EventSourceResponse:
    start = resume_point(last_event_id, after)
    run = await db.run(runs.load_owned, user, run_id)
    return task_stream(request.app.state, bus, run_id, start, None, run.state in RUN_TERMINAL, added=error_event)


@router.post("/runs/{run_id}/cancel", status_code=202, responses={409: {"description": "already ended"}})
async def cancel_run(run_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    await runs.cancel(db, bus, user, run_id)
    return {"id": run_id, "state": "cancelling", "links": {"self": f"/api/v1/runs/{run_id}"}}


@router.post("/runs/{run_id}/approval", status_code=202, responses={409: {"description": "not awaiting approval"}})
async def approve_run(run_id: str, body: runs.RunApproval, user: CurrentUser, db: DatabaseDep,
                      bus: BusDep) -> dict[str, Any]:
    node_id = await runs.approve(db, bus, user, run_id, body)
    return {"id": run_id, "node_id": node_id, "decision": body.decision}
