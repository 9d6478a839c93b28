"""Completion callbacks (thin): the delivery log (`GET /api/v1/callbacks`, by task or status),
one delivery, a redelivery on demand, and the caller's signing secret (to verify them with)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from services.gateway.deps import BusDep, CurrentUser, DatabaseDep, SettingsDep
from services.gateway.problems import ApiProblem
from services.gateway.triggers import deliveries as svc
from services.gateway.triggers.callbacks import callback_secret

router = APIRouter(prefix="/api/v1/callbacks", tags=["callbacks"])
STATUSES = ("waiting", "pending", "delivered", "failed")


@router.get("")
async def list_deliveries(user: CurrentUser, db: DatabaseDep, task_id: str | None = None,
                          status: str | None = None,
                          limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:  # fmt: skip
    if status is not None and status not in STATUSES:
        raise ApiProblem(422, "Invalid request", f"Unknown status {status!r} (one of {', '.join(STATUSES)}).")
    return {"items": await db.run(svc.list_deliveries, user, task_id, status, limit)}


@router.get("/secret")
async def signing_secret(user: CurrentUser, settings: SettingsDep) -> dict[str, Any]:
    return {"secret": callback_secret(settings, user.id), "scheme": "standard-webhooks"}


@router.get("/{delivery_id}")
async def get_delivery(delivery_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return svc.view(await db.run(svc.load_owned, user, delivery_id))


@router.post("/{delivery_id}/redeliver", status_code=202)
async def redeliver(delivery_id: str, request: Request, user: CurrentUser, db: DatabaseDep,
                    bus: BusDep) -> dict[str, Any]:  # fmt: skip
    request.state.audit_target = f"callback={delivery_id}"
    return await svc.redeliver(db, bus, user, delivery_id)
