"""LangGraph crons (`/lg/runs/crons…`) as Agentix schedules: a translator, no scheduling of its
own. A cron is a schedule (`cron_id` is the schedule's id, so `/api/v1/schedules/{id}` shows its
fires), its `schedule` (5 cron fields) the schedule's 6-field `cron` with second 0, its
`assistant_id` a saved workflow (the schedule's `workflow_id`), `end_time` its `end_at`. Made,
changed and removed through `triggers.scheduling`, which keeps the record and the bus together.

Each body field the SDK sends is supported or refused with a 422 naming it: a schedule fire is a
workflow task, so a thread cron, the chat agent, `config`, `context`, `metadata`, interrupts and a
`webhook` have nowhere to go. Accepted with nothing to do: `durability`/`checkpoint_during` (each
step of a task is stored as it happens, which meets `sync`) and `stream_resumable` (a task's
events are always kept and rejoinable)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlmodel import Session

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.pagination import MAX_OFFSET
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import assistants
from services.gateway.protocols.langgraph.listing import page_of
from services.gateway.protocols.langgraph.refusals import refuse_when_set, refused, unsupported
from services.gateway.triggers import schedules as records
from services.gateway.triggers import scheduling
from services.gateway.triggers.tables import Schedule
from shared.bus import Bus

SelectField = Literal["cron_id", "assistant_id", "thread_id", "end_time", "schedule", "timezone", "created_at",
                      "updated_at", "user_id", "payload", "next_run_date", "metadata", "now", "on_run_completed",
                      "enabled"]
SortBy = Literal["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date", "end_time"]
# The schedules' names of the fields a cron calls otherwise, for their errors.
_RENAMED: Final = {"cron": "schedule", "end_at": "end_time", "workflow_id": "assistant_id"}
_NAMED = re.compile(r"`(cron|end_at|workflow_id)`")
SCHEDULE_MAX: Final = 190  # the schedules' `cron` takes 200 characters, and `0 ` goes before it
_NO_THREAD = "a cron's fire starts a workflow task, which has no thread"


class _CronFields(BaseModel):
    """The fields of a cron's run that create and update share."""

    model_config = ConfigDict(extra="forbid")

    input: dict[str, Any] | None = None
    timezone: str | None = Field(default=None, max_length=64)
    enabled: bool | None = None
    on_run_completed: Literal["delete", "keep"] | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    checkpoint_during: bool | None = None
    stream_resumable: bool | None = None
    # Refused when given (a value that asks for nothing passes): see the validators.
    metadata: Any = None
    config: Any = None
    context: Any = None
    webhook: Any = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    stream_mode: Any = None
    stream_subgraphs: bool | None = None

    _no_metadata = refuse_when_set("metadata", why="a schedule keeps no metadata")
    _no_config = refuse_when_set("config", "context", why="a cron runs a saved workflow, which takes its `input` only")
    _no_webhook = refuse_when_set("webhook", why="a schedule's tasks carry no completion callback")
    _no_pauses = refuse_when_set("interrupt_before", "interrupt_after",
                                 why="a workflow pauses only at its approval nodes")
    _no_stream = refuse_when_set("stream_mode", why="a cron's run streams to nobody; its task's events are read "
                                                    "at /api/v1/tasks/{id}/events")
    _no_subgraphs = refuse_when_set("stream_subgraphs", why="a workflow has no subgraphs")

    @field_validator("on_run_completed")
    @classmethod
    def _kept(cls, value: str | None) -> str | None:
        if value == "delete":
            raise unsupported("on_run_completed: delete", "a cron's run is a workflow task, which has no thread to "
                                                  "delete; the task is kept in the task history (`keep`)")
        return value


class CronCreate(_CronFields):
    """`POST /runs/crons` (and `/threads/{id}/runs/crons`, refused)."""

    assistant_id: str = Field(min_length=1, max_length=200)
    schedule: str = Field(min_length=1, max_length=SCHEDULE_MAX)
    end_time: datetime | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None

    @field_validator("multitask_strategy")
    @classmethod
    def _reject_only(cls, value: str | None) -> str | None:
        if value not in (None, "reject"):
            raise unsupported(f"multitask_strategy: {value}", "a fire while the cron's last run still runs is "
                                                      "skipped and recorded (`reject`)")
        return value


class CronPatch(_CronFields):
    """`PATCH /runs/crons/{id}`: the fields given replace the cron's; `end_time: null` clears it."""

    schedule: str | None = Field(default=None, min_length=1, max_length=SCHEDULE_MAX)
    end_time: datetime | None = None


class CronCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = Field(default=None, max_length=200)
    thread_id: str | None = Field(default=None, max_length=64)
    metadata: dict[str, Any] | None = None


class CronSearch(CronCount):
    enabled: bool | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: SortBy | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[SelectField] | None = Field(default=None, min_length=1)


def six_fields(schedule: str) -> str:
    """A LangGraph schedule (5 cron fields, or a macro such as `@daily`) as the schedules' 6-field
    cron, fired at second 0."""
    expr = schedule.strip()
    if expr.startswith("@"):
        return expr
    fields = expr.split()
    if len(fields) != 5:
        raise records.invalid("schedule", f"a cron schedule has 5 fields (minute hour day month weekday), "
                                          f"got {len(fields)}")
    return "0 " + " ".join(fields)


def _schedule_of(view: dict[str, Any]) -> str:
    """The schedule's timing as a cron's `schedule`: 5 fields when it fires at second 0; else what
    the schedules API set (a 6-field cron, `@every 30s`, `@at <time>`) as the bus reads it."""
    cron = view["cron"]
    if cron is not None:
        fields = cron.split()
        return " ".join(fields[1:]) if len(fields) == 6 and fields[0] == "0" else cron
    if view["every"] is not None:
        return f"@every {view['every']}"
    return "@at " + view["at"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cron_view(view: dict[str, Any]) -> dict[str, Any]:
    """A schedule's view (`schedules.view`) in the shape of a LangGraph cron."""
    schedule = _schedule_of(view)
    upcoming = view["next_fire_times"]
    return {"cron_id": view["id"], "assistant_id": view["workflow_id"], "thread_id": None,
            "user_id": view["user_id"], "schedule": schedule, "timezone": view["timezone"],
            "end_time": view["end_at"], "enabled": view["enabled"], "on_run_completed": "keep",
            "payload": {"assistant_id": view["workflow_id"], "input": view["input"], "schedule": schedule},
            "metadata": {}, "next_run_date": upcoming[0] if upcoming else None,
            "created_at": view["created_at"], "updated_at": view["updated_at"], "now": datetime.now(UTC)}


def _renamed(exc: ApiProblem) -> ApiProblem:
    """A schedules' error with the cron's names of its fields."""
    for item in exc.errors or []:
        if item.get("field") in _RENAMED:
            item["field"] = _RENAMED[item["field"]]
    exc.detail = _NAMED.sub(lambda m: f"`{_RENAMED[m.group(1)]}`", exc.detail)
    return exc


def check_assistant(session: Session, user: Principal, assistant_id: str) -> None:
    """404 for nobody's assistant; 422 naming `assistant_id` for one that is not a saved workflow."""
    if assistants.get(session, user, assistant_id)["graph_id"] != assistants.WORKFLOW_GRAPH:
        raise refused("assistant_id", "a cron runs a saved workflow (an assistant of graph `workflow`): "
                                      "a schedule's fire is a workflow task, the chat agent runs on a thread")


def refuse_thread() -> ApiProblem:
    return refused("thread_id", f"thread crons are not supported: {_NO_THREAD} (use POST /runs/crons)")


async def create(db: Database, bus: Bus, user: Principal, body: CronCreate) -> dict[str, Any]:
    await db.run(check_assistant, user, body.assistant_id)
    try:
        made = records.ScheduleCreate(workflow_id=body.assistant_id, input=body.input or {},
                                      cron=six_fields(body.schedule), timezone=body.timezone or "UTC",
                                      enabled=True if body.enabled is None else body.enabled, end_at=body.end_time)
        row = await scheduling.create(db, bus, user, made)
    except ApiProblem as exc:
        raise _renamed(exc) from None
    return cron_view(records.view(row))


async def update(db: Database, bus: Bus, user: Principal, cron_id: str, body: CronPatch) -> dict[str, Any]:
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    try:
        if body.schedule is not None:
            changes["cron"] = six_fields(body.schedule)
        if body.timezone is not None:
            changes["timezone"] = body.timezone
        if "end_time" in given:
            changes["end_at"] = body.end_time
        if body.input is not None:
            changes["input"] = body.input
        if body.enabled is not None:
            changes["enabled"] = body.enabled
        row = await scheduling.update(db, bus, user, cron_id, records.SchedulePatch(**changes))
    except ApiProblem as exc:
        raise _renamed(exc) from None
    return cron_view(records.view(row))


async def delete(db: Database, bus: Bus, user: Principal, cron_id: str) -> None:
    await scheduling.delete(db, bus, user, cron_id)


def get(session: Session, user: Principal, cron_id: str) -> dict[str, Any]:
    row: Schedule = records.load_owned(session, user, cron_id)
    return cron_view(records.view(row))


def _matching(session: Session, user: Principal, query: CronCount, enabled: bool | None = None) -> list[dict[str, Any]]:
    if query.thread_id is not None:
        return []  # no cron runs on a thread
    found = [cron_view(v) for v in records.list_schedules(session, user)]
    if query.assistant_id is not None:
        found = [c for c in found if c["assistant_id"] == query.assistant_id]
    if enabled is not None:
        found = [c for c in found if c["enabled"] == enabled]
    return [c for c in found if all(c["metadata"].get(k) == v for k, v in (query.metadata or {}).items())]


def search(session: Session, user: Principal, query: CronSearch) -> tuple[list[dict[str, Any]], int | None]:
    """One page (newest first unless sorted otherwise) and the next offset, if any."""
    found = _matching(session, user, query, query.enabled)
    return page_of(found, sort_by=query.sort_by, sort_order=query.sort_order, offset=query.offset, limit=query.limit,
                   select=query.select)


def count(session: Session, user: Principal, query: CronCount) -> int:
    return len(_matching(session, user, query))
