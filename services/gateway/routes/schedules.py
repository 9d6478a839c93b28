"""`/api/v1/schedules` (thin): schedules of the caller's workflows — made, listed, read, changed,
paused and resumed, removed, run now — and each one's fire history. The record is written first,
then its definition on the schedules stream (the server fires it); a definition the server
refuses undoes the record."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from nats.js.errors import APIError

from services.gateway.deps import BusDep, CurrentUser, DatabaseDep
from services.gateway.problems import ApiProblem
from services.gateway.runs.submit import queue_task
from services.gateway.tables import now
from services.gateway.triggers import schedules as records
from services.gateway.triggers.fires import put_schedule, remove_schedule
from services.gateway.triggers.firing import decide_now
from services.gateway.triggers.tables import Schedule
from shared.bus import Bus

router = APIRouter(prefix="/api/v1/schedules", tags=["schedules"])


async def _sync(bus: Bus, db: Any, row: Schedule) -> None:
    """Make the bus hold what the record says: the definition when enabled, none when paused."""
    if not row.enabled:
        await remove_schedule(bus, row.id)
        await db.run(records.set_def_seq, row.id, None)
        return
    try:
        seq = await put_schedule(bus, row.id, records.timing_of_row(row))
    except APIError as exc:  # the server is the last judge of a cron expression
        raise records.invalid("cron", f"the message bus refused the schedule: {exc.description}") from None
    await db.run(records.set_def_seq, row.id, seq)


@router.post("", status_code=201)
async def create_schedule(body: records.ScheduleCreate, request: Request, user: CurrentUser, db: DatabaseDep,
                          bus: BusDep) -> dict[str, Any]:  # fmt: skip
    row = await db.run(records.create, user, body)
    try:
        await _sync(bus, db, row)
    except BaseException:
        await db.run(records.delete, user, row.id)
        raise
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
    row, rewrite = await db.run(records.update, user, schedule_id, body)
    if rewrite:
        await _sync(bus, db, row)
    request.state.audit_target = f"schedule={schedule_id}"
    return records.view(row)


async def _enable(schedule_id: str, enabled: bool, user: CurrentUser, db: DatabaseDep, bus: Bus) -> dict[str, Any]:
    row, rewrite = await db.run(records.set_enabled, user, schedule_id, enabled)
    if rewrite:
        await _sync(bus, db, row)
    return records.view(row)


@router.post("/{schedule_id}/pause")
async def pause_schedule(schedule_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    return await _enable(schedule_id, False, user, db, bus)


@router.post("/{schedule_id}/resume")
async def resume_schedule(schedule_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    return await _enable(schedule_id, True, user, db, bus)


@router.delete("/{schedule_id}")
async def delete_schedule(schedule_id: str, request: Request, user: CurrentUser, db: DatabaseDep,
                          bus: BusDep) -> dict[str, Any]:  # fmt: skip
    await db.run(records.load_owned, user, schedule_id)
    await remove_schedule(bus, schedule_id)  # first the server stops firing it, then the record goes
    row = await db.run(records.delete, user, schedule_id)
    request.state.audit_target = f"schedule={schedule_id}"
    return {"id": row.id, "deleted": True}


@router.post("/{schedule_id}/run", status_code=202)
async def run_now(schedule_id: str, user: CurrentUser, db: DatabaseDep, bus: BusDep) -> dict[str, Any]:
    """A fire now, outside the schedule's timing: its task starts at once."""
    await db.run(records.load_owned, user, schedule_id)
    fire_id, task = await db.run(decide_now, schedule_id, now())
    if task is None:
        raise ApiProblem(422, "Invalid request", "The schedule's workflow refused its input; see its fires.")
    await queue_task(db, bus, task)
    return {"fire_id": fire_id, "task_id": task.id}


@router.get("/{schedule_id}/fires")
async def list_fires(schedule_id: str, user: CurrentUser, db: DatabaseDep,
                     limit: int = Query(default=50, ge=1, le=500)) -> dict[str, Any]:  # fmt: skip
    return {"items": await db.run(records.list_fires, user, schedule_id, limit)}
