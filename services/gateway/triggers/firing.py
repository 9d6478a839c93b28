"""Each fire of a schedule becomes exactly one task, or one recorded skip. The gateways share one
durable consumer of the fires (`triggers`); whichever takes a fire decides it in one transaction
that writes the fire's row in the history (keyed by its id, `fire:<schedule>:<seq>`) together
with its task (the fire's id as the task's idempotency key), so a fire delivered again — its
gateway died before the ack, or two took it — finds its decision and starts nothing twice. The
task is queued after that commit (the requeuer publishes one a crash left unqueued; the stream
drops a second copy by its message id), and the fire is acked last. A batch of fires is decided
in one transaction."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlmodel import Session, col, func, select

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.runs.consumer import BatchConsumer
from services.gateway.runs.submit import SubmitTask, insert_tasks, prepared_task, queue_task
from services.gateway.tables import Task, aware
from services.gateway.triggers.catch_up import judge, parse_next
from services.gateway.triggers.fires import Fire, read_fire
from services.gateway.triggers.tables import Schedule, ScheduleFire
from shared.bus import Bus
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.triggers")
FIRES: Table = ScheduleFire.__table__  # type: ignore[attr-defined]  # sqlmodel does not declare it


def running_counts(session: Session, schedule_ids: list[str]) -> dict[str, int]:
    """Runs of each schedule not ended by their task record."""
    query = (
        select(ScheduleFire.schedule_id, func.count())
        .join(Task, col(Task.id) == col(ScheduleFire.task_id))
        .where(col(ScheduleFire.schedule_id).in_(schedule_ids), ScheduleFire.outcome == "started",
               col(Task.status).not_in(TERMINAL))
        .group_by(col(ScheduleFire.schedule_id))
    )
    counts = dict.fromkeys(schedule_ids, 0)
    counts.update({sid: int(n) for sid, n in session.exec(query)})
    return counts


def _why_not(row: Schedule, fire: Fire, late_reason: str | None, now_running: int) -> str | None:
    if not row.enabled:
        return "the schedule is paused"
    end_at = aware(row.end_at)
    if end_at is not None and fire.fired_at > end_at:
        return f"past the schedule's end_at ({end_at.isoformat()})"
    if late_reason is not None:
        return late_reason
    if now_running >= row.max_concurrent:
        return f"{now_running} run(s) of this schedule still running (max_concurrent: {row.max_concurrent})"
    return None


def _task_for(session: Session, row: Schedule, fire_id: str, fired_at: datetime) -> tuple[Task | None, str | None]:
    """The fire's task (not yet written), naming the schedule and the fire's time as its
    trigger; or why it starts none: a workflow gone or an input it no longer takes."""
    body = SubmitTask(workflow_id=row.workflow_id, input=dict(row.input or {}))
    trigger = {"kind": "schedule", "id": row.id, "fired_at": fired_at.isoformat()}
    try:
        return prepared_task(session, Principal(id=row.user_id), body, fire_id, trigger), None
    except ApiProblem as exc:
        return None, f"the task was refused: {exc.detail}"


def decide_all(session: Session, fires: list[Fire]) -> list[Task]:
    """A batch of fires decided in one transaction — their records and tasks written together,
    one statement per table (on SQLite, writers one at a time would wait on each other's lock)
    — with the schedules' rows locked in id order, so two gateways never deadlock. Returns the
    tasks to queue (those of fires delivered again whose task a crash left unqueued too)."""
    fires = sorted({f.fire_id: f for f in fires}.values(), key=lambda f: (f.schedule_id, f.seq))
    ids = sorted({f.schedule_id for f in fires})
    schedules = {r.id: r for r in session.exec(select(Schedule).where(col(Schedule.id).in_(ids))
                                               .order_by(col(Schedule.id)).with_for_update())}
    fire_ids = [f.fire_id for f in fires]
    seen = {r.id: r for r in session.exec(select(ScheduleFire).where(col(ScheduleFire.id).in_(fire_ids)))}
    counts = running_counts(session, ids)
    records: list[dict[str, Any]] = []
    tasks: list[Task] = []
    again: list[str] = []
    for fire in fires:
        row = schedules.get(fire.schedule_id)
        if row is None:  # removed since: its fires start nothing and leave nothing
            continue
        if (prior := seen.get(fire.fire_id)) is not None:  # delivered again: decided already
            if prior.task_id:
                again.append(prior.task_id)
            continue
        expected = aware(row.next_expected_at)
        if row.last_fire_seq is None or fire.seq > row.last_fire_seq:
            row.last_fire_seq, row.last_fired_at = fire.seq, fire.fired_at
            row.next_expected_at = parse_next(fire.next_at)
            session.add(row)
        verdict = judge(fire.fired_at, expected, "once" if row.catch_up == "once" else "skip")
        reason = _why_not(row, fire, verdict.reason, counts[row.id])
        task = None
        if reason is None:
            task, reason = _task_for(session, row, fire.fire_id, fire.fired_at)
        if task is not None:
            tasks.append(task)
            counts[row.id] += 1
        records.append({"id": fire.fire_id, "schedule_id": row.id, "seq": fire.seq, "fired_at": fire.fired_at,
                        "outcome": "skipped" if reason else "started", "reason": reason,
                        "task_id": task.id if task else None, "late": verdict.late})
    insert_tasks(session, tasks)
    if records:
        session.execute(FIRES.insert(), records)
    if again:
        tasks += session.exec(select(Task).where(col(Task.id).in_(again), col(Task.queued_at).is_(None))).all()
    return tasks


def decide_now(session: Session, schedule_id: str, at: datetime) -> tuple[str, Task | None]:
    """`run now`: a fire of its own (asked for by a person: not held back by `max_concurrent`)."""
    row = session.get(Schedule, schedule_id)
    assert row is not None
    fire_id = f"now:{schedule_id}:{new_id('n')}"
    task, refused = _task_for(session, row, fire_id, at)
    insert_tasks(session, [task] if task else [])
    session.add(ScheduleFire(id=fire_id, schedule_id=schedule_id, fired_at=at, reason=refused or "run now",
                             outcome="skipped" if refused else "started", task_id=task.id if task else None))
    return fire_id, task


class FireConsumer:
    """The gateway's share of the fires: decide a batch (with their tasks), queue the tasks, ack."""

    def __init__(self, bus: Bus, db: Database, batch: int = 200) -> None:
        self.bus = bus
        self.db = db
        self._consumer = BatchConsumer(bus, bus.names.schedules_stream, bus.names.triggers_consumer, read_fire,
                                       self.decide, name="schedule fires", batch=batch, grace_s=1.0)

    async def start(self) -> None:
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()

    async def decide(self, fires: list[Fire]) -> None:
        tasks = await self.db.run(decide_all, fires)
        await asyncio.gather(*(queue_task(self.db, self.bus, task) for task in tasks))
        # Which gateway decided a fire is written nowhere else (the history has no column for it).
        log.info("decided %s", ", ".join(f.fire_id for f in fires))
