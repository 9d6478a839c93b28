"""`/api/v1/schedules` (thin): schedules of the caller's workflows — made, listed, read, changed,
paused and resumed, removed, run now — and each one's fire history. The record and its
definition on the bus are kept together by `triggers.scheduling`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from services.gateway.deps import BusDep, CurrentUser, DatabaseDep
from services.gateway.triggers import schedules as records
from services.gateway.triggers import scheduling

router = APIRouter(prefix="/api/v1/schedules", tags=["schedules"])


@router.post("", status_code=201)
async def create_schedule(body: records.ScheduleCreate, request: Request, user: CurrentUser, db: DatabaseDep,
                          bus: BusDep) -> dict[str, Any]:  # fmt: skip
    row = await scheduling.create(db, bus, user, body)
    request.state.audit_target = f"schedule={row.id}"
    return records.view(row)


@router.get("")
async def list_schedules(user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return {"items": await db.run(records.list_schedules, user)}


@router.get("/{schedule_id}")
async def get_schedule(schedule_id: str, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return records.view(await db.run(records.load_owned, user, schedule_id))


@router.patch("/{schedule_id}")
async def patch_schedule(schedule_id: str, body: records.SchedulePatch, request: Request, user: CurrentUser,
                         db: DatabaseDep, bus: BusDep) -> dict[str, Any]:  # fmt: skip
    row = await scheduling.update(db, bus, user, schedule_id, body)
    request.state.audit_target = f"schedule={schedule_id}"
    return records.view(row)


@router.post("/{schedule_id}/pause")
async def pause_schedule(schedule_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    return records.view(await scheduling.set_enabled(db, bus, user, schedule_id, False))


@router.post("/{schedule_id}/resume")
async def resume_schedule(schedule_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    return records.view(await scheduling.set_enabled(db, bus, user, schedule_id, True))


@router.delete("/{schedule_id}")
async def delete_schedule(schedule_id: str, request: Request, user: CurrentUser, db: DatabaseDep,
                          bus: BusDep) -> dict[str, Any]:  # fmt: skip
    row = await scheduling.delete(db, bus, user, schedule_id)
    request.state.audit_target = f"schedule={schedule_id}"
    return {"id": row.id, "deleted": True}


@router.post("/{schedule_id}/run", status_code=202)
async def run_now(schedule_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    """A fire now, outside the schedule's timing: its task starts at once."""
    return await scheduling.run_now(db, bus, user, schedule_id)


@router.get("/{schedule_id}/fires")
async def list_fires(schedule_id: str, user: CurrentUser, db: DatabaseDep,
                     limit: int = Query(default=50, ge=1, le=500)) -> dict[str, Any]:  # fmt: skip
    return {"items": await db.run(records.list_fires, user, schedule_id, limit)}
