"""Inbound webhooks (thin): `/api/v1/hooks` (make one — its secret shown once —, list, read,
change, delete) and the public receiving route `POST /hooks/{id}`, which needs no token: the
call's signature is its credential (`triggers/inbound.py`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from services.gateway.deps import CurrentUser, DatabaseDep, SettingsDep
from services.gateway.runs.views import links
from services.gateway.triggers import hooks as svc
from services.gateway.triggers.callbacks import check_webhook
from services.gateway.triggers.inbound import receive

router = APIRouter(tags=["hooks"])


@router.post("/api/v1/hooks", status_code=201)
async def create_hook(body: svc.HookCreate, request: Request, user: CurrentUser, db: DatabaseDep,
                      settings: SettingsDep) -> dict[str, Any]:  # fmt: skip
    await check_webhook(settings, body.webhook)
    out = await db.run(svc.create, user, body, settings.persistent_secret("secret_key"))
    request.state.audit_target = f"hook={out['id']}"
    return out


@router.get("/api/v1/hooks")
async def list_hooks(user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return {"items": await db.run(svc.list_hooks, user)}


@router.get("/api/v1/hooks/{hook_id}")
async def get_hook(hook_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return svc.view(await db.run(svc.load_owned, user, hook_id))


@router.patch("/api/v1/hooks/{hook_id}")
async def update_hook(hook_id: str, body: svc.HookPatch, request: Request, user: CurrentUser, db: DatabaseDep,
                      settings: SettingsDep) -> dict[str, Any]:  # fmt: skip
    await check_webhook(settings, body.webhook)
    request.state.audit_target = f"hook={hook_id}"
    return await db.run(svc.update, user, hook_id, body)


@router.delete("/api/v1/hooks/{hook_id}", status_code=204)
async def delete_hook(hook_id: str, request: Request, user: CurrentUser, db: DatabaseDep) -> None:
    request.state.audit_target = f"hook={hook_id}"
    await db.run(svc.delete, user, hook_id)


@router.post("/hooks/{hook_id}", status_code=202, responses={
    401: {"description": "bad, missing or stale signature"}, 409: {"description": "replayed delivery id, or disabled"},
    413: {"description": "body too large"}, 429: {"description": "the hook's rate limit"},
})  # fmt: skip
async def call_hook(hook_id: str, request: Request) -> JSONResponse:
    accepted = await receive(request, hook_id)
    task = accepted.task
    return JSONResponse({"id": task.id, "task_id": task.id, "status": task.status, "queued": accepted.queued,
                         "hook_id": hook_id, "delivery_id": accepted.delivery_id, "links": links(task.id)},
                        status_code=202)
