"""The schedules' records (docs/API.md "Schedules"): made, read, changed and removed for their
owner, each answer with the next fire times; the fire history. The bus side (the definition the
server fires) is `fires.py`; the routes put the two together."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.dsl import check_input
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.tables import Workflow, aware, now
from services.gateway.triggers.next_fires import cron_error, next_fires
from services.gateway.triggers.tables import Schedule, ScheduleFire
from services.gateway.triggers.timing import Timing

MAX_SCHEDULES_PER_USER = 500
NEXT_SHOWN = 5
TIMING_FIELDS = ("cron", "every", "at", "timezone")
_FIELD = re.compile(r"`(\w+)`")


class ScheduleCreate(BaseModel):
    """`POST /api/v1/schedules`: exactly one of `cron` (6 fields, seconds first), `every`, `at`."""

    model_config = ConfigDict(extra="forbid")

    workflow_id: str = Field(min_length=1, max_length=64)
    input: dict[str, Any] = Field(default_factory=dict)
    name: str | None = Field(default=None, max_length=200)
    cron: str | None = Field(default=None, max_length=200)
    every: str | None = Field(default=None, max_length=32)
    at: datetime | None = None
    timezone: str = Field(default="UTC", max_length=64)
    enabled: bool = True
    catch_up: Literal["skip", "once"] = "skip"
    max_concurrent: int = Field(default=1, ge=1, le=1000)
    end_at: datetime | None = None


class SchedulePatch(BaseModel):
    """`PATCH /api/v1/schedules/{id}`: the fields given replace the schedule's; giving any of
    `cron`, `every`, `at` replaces its timing (the others of the three are cleared)."""

    model_config = ConfigDict(extra="forbid")

    input: dict[str, Any] | None = None
    name: str | None = Field(default=None, max_length=200)
    cron: str | None = Field(default=None, max_length=200)
    every: str | None = Field(default=None, max_length=32)
    at: datetime | None = None
    timezone: str | None = Field(default=None, max_length=64)
    enabled: bool | None = None
    catch_up: Literal["skip", "once"] | None = None
    max_concurrent: int | None = Field(default=None, ge=1, le=1000)
    end_at: datetime | None = None


def invalid(field: str, detail: str) -> ApiProblem:
    return ApiProblem(422, "Invalid request", detail, errors=[{"code": "invalid", "field": field, "message": detail}])


def timing_of(cron: str | None, every: str | None, at: datetime | None, timezone: str) -> Timing:
    """The schedule's timing, or a 422 naming the field that is wrong."""
    try:
        timing = Timing(cron=cron, every=every, at=at, timezone=timezone)
    except ValidationError as exc:
        message = str(exc.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")
        named = _FIELD.search(message)
        raise invalid(named.group(1) if named else "cron", message) from None
    if timing.cron is not None and (why := cron_error(timing.cron)) is not None:
        raise invalid("cron", why)
    return timing


def timing_of_row(row: Schedule) -> Timing:
    return Timing(cron=row.cron, every=row.every, at=aware(row.at), timezone=row.timezone)


def _check_end(end_at: datetime | None) -> None:
    if end_at is not None and end_at.tzinfo is None:
        raise invalid("end_at", "`end_at` needs a UTC offset (RFC 3339), e.g. 2027-01-01T00:00:00Z")


def _workflow(session: Session, user: Principal, workflow_id: str) -> Workflow:
    workflow = session.get(Workflow, workflow_id)
    if workflow is None or not user.can_see(workflow.user_id):
        raise ApiProblem(404, "Not Found", f"No workflow {workflow_id!r}.",
                         errors=[{"code": "not_found", "field": "workflow_id", "message": "no such workflow"}])
    return workflow


def view(row: Schedule, at: datetime | None = None) -> dict[str, Any]:
    timing = timing_of_row(row)
    upcoming: list[datetime] = []
    if row.enabled:
        upcoming = next_fires(timing, at or now(), NEXT_SHOWN, anchor=aware(row.updated_at), end_at=aware(row.end_at))
    return {
        "id": row.id, "name": row.name, "user_id": row.user_id, "workflow_id": row.workflow_id,
        "input": row.input or {}, "cron": row.cron, "every": row.every, "at": aware(row.at),
        "timezone": row.timezone, "enabled": row.enabled, "catch_up": row.catch_up,
        "max_concurrent": row.max_concurrent, "end_at": aware(row.end_at),
        "created_at": aware(row.created_at), "updated_at": aware(row.updated_at),
        "last_fired_at": aware(row.last_fired_at),
        "next_fire_times": [t.isoformat() for t in upcoming],
    }


def create(session: Session, user: Principal, body: ScheduleCreate) -> Schedule:
    timing = timing_of(body.cron, body.every, body.at, body.timezone)
    _check_end(body.end_at)
    workflow = _workflow(session, user, body.workflow_id)
    check_input(workflow.dsl, body.input)
    count = len(session.exec(select(Schedule.id).where(Schedule.user_id == user.id)).all())
    if count >= MAX_SCHEDULES_PER_USER:
        raise ApiProblem(409, "Conflict", f"You have {MAX_SCHEDULES_PER_USER} schedules; remove one first.")
    row = Schedule(id=new_id("sch"), user_id=user.id, name=body.name, workflow_id=workflow.id, input=body.input,
                   cron=timing.cron, every=timing.every, at=timing.at, timezone=timing.timezone, enabled=body.enabled,
                   catch_up=body.catch_up, max_concurrent=body.max_concurrent, end_at=body.end_at)
    session.add(row)
    session.flush()
    return row


def load_owned(session: Session, user: Principal, schedule_id: str) -> Schedule:
    row = session.get(Schedule, schedule_id)
    if row is None or not user.can_see(row.user_id):
        raise ApiProblem(404, "Not Found", f"No schedule {schedule_id}.")
    return row


def list_schedules(session: Session, user: Principal) -> list[dict[str, Any]]:
    query = select(Schedule).order_by(col(Schedule.id).desc())
    if not user.is_admin:
        query = query.where(Schedule.user_id == user.id)
    at = now()
    return [view(r, at) for r in session.exec(query)]


def update(session: Session, user: Principal, schedule_id: str, body: SchedulePatch) -> tuple[Schedule, bool]:
    """The changed row, and whether its definition on the bus must be written again."""
    row = load_owned(session, user, schedule_id)
    given = body.model_fields_set
    rewrite = False
    if given & set(TIMING_FIELDS):
        kinds = given & {"cron", "every", "at"}
        cron, every, at = ((body.cron, body.every, body.at) if kinds else (row.cron, row.every, aware(row.at)))
        timing = timing_of(cron, every, at, body.timezone if body.timezone is not None else row.timezone)
        row.cron, row.every, row.at, row.timezone = timing.cron, timing.every, timing.at, timing.timezone
        rewrite = True
    if "input" in given and body.input is not None:
        check_input(_workflow(session, user, row.workflow_id).dsl, body.input)
        row.input = body.input
    if "end_at" in given:
        _check_end(body.end_at)
        row.end_at = body.end_at
    for field in ("name", "catch_up", "max_concurrent"):
        if field in given and getattr(body, field) is not None:
            setattr(row, field, getattr(body, field))
    if "enabled" in given and body.enabled is not None and body.enabled != row.enabled:
        row.enabled = body.enabled
        rewrite = True
    row.updated_at = now()
    session.add(row)
    session.flush()
    return row, rewrite


def set_enabled(session: Session, user: Principal, schedule_id: str, enabled: bool) -> tuple[Schedule, bool]:
    return update(session, user, schedule_id, SchedulePatch(enabled=enabled))


def set_def_seq(session: Session, schedule_id: str, seq: int | None) -> None:
    row = session.get(Schedule, schedule_id)
    if row is not None:
        row.def_seq = seq
        session.add(row)


def delete(session: Session, user: Principal, schedule_id: str) -> Schedule:
    row = load_owned(session, user, schedule_id)
    session.delete(row)
    return row


def fire_view(row: ScheduleFire) -> dict[str, Any]:
    return {"id": row.id, "seq": row.seq, "fired_at": aware(row.fired_at), "outcome": row.outcome,
            "reason": row.reason, "task_id": row.task_id, "late": row.late}  # fmt: skip


def list_fires(session: Session, user: Principal, schedule_id: str, limit: int) -> list[dict[str, Any]]:
    load_owned(session, user, schedule_id)
    rows = session.exec(select(ScheduleFire).where(ScheduleFire.schedule_id == schedule_id)
                        .order_by(col(ScheduleFire.fired_at).desc(), col(ScheduleFire.id).desc()).limit(limit))
    return [fire_view(r) for r in rows]


def utc(value: datetime) -> datetime:
    return value.astimezone(UTC)
