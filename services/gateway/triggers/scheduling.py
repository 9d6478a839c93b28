"""A schedule made, changed, paused, removed or run now, with its record and its definition on the
bus kept together: the record is written first, then its definition on the schedules stream (the
server fires it); a definition the server refuses undoes the record. What every front door of
the schedules calls (`/api/v1/schedules`, LangGraph crons at `/lg`), so none does it its own way."""

from __future__ import annotations

from typing import Any

from nats.js.errors import APIError

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.runs.submit import queue_task
from services.gateway.tables import now
from services.gateway.triggers import schedules as records
from services.gateway.triggers.fires import put_schedule, remove_schedule
from services.gateway.triggers.firing import decide_now
from services.gateway.triggers.tables import Schedule
from shared.bus import Bus


async def sync(bus: Bus, db: Database, row: Schedule) -> None:
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


async def create(db: Database, bus: Bus, user: Principal, body: records.ScheduleCreate) -> Schedule:
    row = await db.run(records.create, user, body)
    try:
        await sync(bus, db, row)
    except BaseException:
        await db.run(records.delete, user, row.id)
        raise
    return row


async def update(db: Database, bus: Bus, user: Principal, schedule_id: str, body: records.SchedulePatch) -> Schedule:
    row, rewrite = await db.run(records.update, user, schedule_id, body)
    if rewrite:
        await sync(bus, db, row)
    return row


async def set_enabled(db: Database, bus: Bus, user: Principal, schedule_id: str, enabled: bool) -> Schedule:
    return await update(db, bus, user, schedule_id, records.SchedulePatch(enabled=enabled))


async def delete(db: Database, bus: Bus, user: Principal, schedule_id: str) -> Schedule:
    await db.run(records.load_owned, user, schedule_id)
    await remove_schedule(bus, schedule_id)  # first the server stops firing it, then the record goes
    return await db.run(records.delete, user, schedule_id)


async def run_now(db: Database, bus: Bus, user: Principal, schedule_id: str) -> dict[str, Any]:
    """A fire now, outside the schedule's timing: its task starts at once."""
    await db.run(records.load_owned, user, schedule_id)
    fire_id, task = await db.run(decide_now, schedule_id, now())
    if task is None:
        raise ApiProblem(422, "Invalid request", "The schedule's workflow refused its input; see its fires.")
    await queue_task(db, bus, task)
    return {"fire_id": fire_id, "task_id": task.id}
