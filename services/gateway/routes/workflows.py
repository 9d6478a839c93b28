"""Saved workflows: `GET/POST /workflows`, `GET/PUT/DELETE /workflows/{id}`, and their versions:
`GET /workflows/{id}/versions`, `GET /workflows/{id}/versions/{n}`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from services.gateway import workflows as svc
from services.gateway.deps import CurrentUser, DatabaseDep
from services.gateway.pagination import Cursor, Limit, Page
from services.gateway.protocols.mcp.notifications import workflow_changed

router = APIRouter(prefix="/api/v1/workflows", tags=["workflows"])


@router.get("", response_model=Page)
async def list_workflows(user: CurrentUser, db: DatabaseDep, limit: Limit = 50, cursor: Cursor = None) -> Page:
    return await db.run(svc.list_page, user, limit, cursor)


@router.post("", status_code=201, responses={422: {"description": "invalid workflow"}})
async def create(body: svc.WorkflowIn, request: Request, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    out = await db.run(svc.create, user, body)
    request.state.audit_target = f"workflow_id={out['id']}"
    await workflow_changed(getattr(request.app.state, "bus", None), user.id, out["id"], listing=True)
    return out


@router.get("/{workflow_id}")
async def get(workflow_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(svc.get, user, workflow_id)


@router.put("/{workflow_id}", responses={422: {"description": "invalid workflow"}})
async def update(workflow_id: str, body: svc.WorkflowIn, request: Request, user: CurrentUser,
                 db: DatabaseDep) -> dict[str, Any]:  # fmt: skip
    out = await db.run(svc.update, user, workflow_id, body)
    # The tool's title, description and input schema may have changed with it.
    await workflow_changed(getattr(request.app.state, "bus", None), user.id, workflow_id, listing=True)
    return out


@router.delete("/{workflow_id}", status_code=204, response_class=Response)
async def delete(workflow_id: str, request: Request, user: CurrentUser, db: DatabaseDep) -> Response:
    await db.run(svc.delete, user, workflow_id)
    await workflow_changed(getattr(request.app.state, "bus", None), user.id, workflow_id, listing=True)
    return Response(status_code=204)


@router.get("/{workflow_id}/versions")
async def list_versions(workflow_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(svc.list_versions, user, workflow_id)


@router.get("/{workflow_id}/versions/{number}")
async def get_version(workflow_id: str, number: int, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(svc.get_version, user, workflow_id, number)
