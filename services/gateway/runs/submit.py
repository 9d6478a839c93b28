"""A task's way onto the work queue: submission (idempotent), cancel and retry.
The row is written first, then the message is queued (`queued_at` marks success). A row left
unqueued — NATS down at submit, or a crash in between — stays `submitted` and is re-published
by `requeue_unpublished` with the same message id, so the stream drops a second copy."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Table, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat.tables import ChatRun
from services.gateway.db import Database, insert_row, new_row
from services.gateway.dsl import check_dsl, check_input
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.runs.views import links, load_owned
from services.gateway.tables import IdempotencyKey, Task, Workflow, aware, now
from services.gateway.triggers.tables import CallbackDelivery
from shared.bus import Bus
from shared.bus.events import EventPublisher, last_event_n
from shared.contract.events import finish_task
from shared.contract.task import RETRYABLE, TERMINAL, CancelMessage, TaskMessage, TaskOptions

log = logging.getLogger("agentix.gateway.tasks")
TASKS: Table = Task.__table__  # type: ignore[attr-defined]  # sqlmodel does not declare it
KEYS: Table = IdempotencyKey.__table__  # type: ignore[attr-defined]
IDEMPOTENCY_WINDOW = timedelta(hours=24)
REQUEUE_BATCH = 200


class _KeyTaken(Exception):
    """The idempotency key was claimed by a concurrent request."""


class SubmitTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dsl: dict[str, Any] | None = Field(default=None, description="the workflow (DSL.md); or give workflow_id")
    workflow_id: str | None = Field(default=None, max_length=64)
    input: dict[str, Any] = Field(default_factory=dict)
    options: TaskOptions = Field(default_factory=TaskOptions)
    session_id: str | None = Field(default=None, max_length=128)
    webhook: str | None = Field(default=None, max_length=2000,
                                description="a URL the task's result is POSTed to when it ends (signed)")


def accepted(task: Task, queued: bool) -> dict[str, Any]:
    # `queued: false`: the row is kept and the message bus gets it as soon as it is reachable.
    return {"id": task.id, "status": task.status, "queued": queued, "links": links(task.id)}


# ---- submission ----------------------------------------------------------------------------


def _existing_for_key(session: Session, user_id: str, key: str) -> Task | None:
    row = session.get(IdempotencyKey, (user_id, key))
    if row is None or aware(row.created_at) < now() - IDEMPOTENCY_WINDOW:  # type: ignore[operator]
        return None
    return session.get(Task, row.task_id)


def _resolve_dsl(session: Session, user: Principal, body: SubmitTask) -> tuple[dict[str, Any], str | None]:
    if body.dsl is not None and body.workflow_id is not None:
        raise ApiProblem(422, "Invalid request", "Give either `dsl` or `workflow_id`, not both.")
    if body.dsl is not None:
        return body.dsl, None
    if body.workflow_id is None:
        raise ApiProblem(
            422,
            "Invalid request",
            "The request needs a `dsl` (the workflow) or a `workflow_id`.",
            errors=[{"code": "missing", "message": "dsl or workflow_id is required", "field": "dsl"}],
        )
    workflow = session.get(Workflow, body.workflow_id)
    if workflow is None or not user.can_see(workflow.user_id):
        raise ApiProblem(404, "Not Found", f"No workflow {body.workflow_id!r}.")
    return workflow.dsl, workflow.id


def _task_values(user: Principal, body: SubmitTask, dsl: dict[str, Any], workflow_id: str | None, key: str | None,
                 grey: list[str], trigger: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """A new task row's columns (the others take their defaults). `trigger`: what started it when
    no person did (a schedule's fire, a hook's call); never taken from a request's body."""
    return {
        "id": new_id("t"),
        "user_id": user.id,
        "workflow_id": workflow_id,
        "dsl": dsl,
        "input": body.input,
        "options": body.options.model_dump(exclude_none=True),
        "guardrail_grey": grey,
        "idempotency_key": key,
        "session_id": body.session_id,
        "trigger": trigger,
    }


def _create(session: Session, user: Principal, body: SubmitTask, key: str | None, grey: list[str],
            trigger: dict[str, Any] | None = None) -> tuple[Task, bool]:  # fmt: skip
    """Insert the task (and its idempotency key); returns (task, created)."""
    if key:
        existing = _existing_for_key(session, user.id, key)
        if existing is not None:
            return existing, False
    dsl, workflow_id = _resolve_dsl(session, user, body)
    check_dsl(dsl)
    check_input(dsl, body.input)
    task = Task(**_task_values(user, body, dsl, workflow_id, key, grey, trigger))
    session.add(task)
    if body.webhook is not None:  # its delivery log, with the task: a task never ends owing an unknown callback
        session.add(CallbackDelivery(id=new_id("cb"), task_id=task.id, user_id=user.id, url=body.webhook))
    if key:
        held = session.get(IdempotencyKey, (user.id, key), populate_existing=True)
        if held is not None:
            if aware(held.created_at) >= now() - IDEMPOTENCY_WINDOW:  # type: ignore[operator]
                raise _KeyTaken  # a parallel request just took the key: answer with its task
            session.delete(held)  # older than the window: the key starts a new task
            session.flush()
        session.add(IdempotencyKey(user_id=user.id, key=key, task_id=task.id))
    session.flush()
    return task, True


def create_in(session: Session, user: Principal, body: SubmitTask, key: str,
              trigger: dict[str, Any] | None = None) -> Task:  # fmt: skip
    """A task row (and its idempotency key) written in the caller's transaction, for a writer
    whose own record must commit with it (a schedule's fire and its task); a key seen before
    answers its task. Queue it with `queue_task` once committed."""
    return _create(session, user, body, key, [], trigger)[0]


def prepared_task(session: Session, user: Principal, body: SubmitTask, key: str,
                  trigger: dict[str, Any] | None = None) -> Task:  # fmt: skip
    """A new task row for `body`, checked as a submission is (workflow, DSL, input) but not
    written: a writer of many at once (a batch of schedule fires, whose keys are new by
    construction) writes them with `insert_tasks` in its own transaction."""
    dsl, workflow_id = _resolve_dsl(session, user, body)
    check_dsl(dsl)
    check_input(dsl, body.input)
    return new_row(Task, **_task_values(user, body, dsl, workflow_id, key, [], trigger))


def insert_tasks(session: Session, tasks: list[Task]) -> None:
    """`prepared_task` rows and their idempotency keys, one statement each (a key taken already
    fails the transaction)."""
    if not tasks:
        return
    session.execute(TASKS.insert(), [t.model_dump() for t in tasks])
    at = now()
    session.execute(KEYS.insert(), [{"user_id": t.user_id, "key": t.idempotency_key, "task_id": t.id, "created_at": at}
                                    for t in tasks if t.idempotency_key])


async def _create_task(db: Database, user: Principal, body: SubmitTask, key: str | None,
                       grey: list[str], trigger: dict[str, Any] | None) -> tuple[Task, bool]:  # fmt: skip
    """`_create`; a task given as a DSL without an idempotency key — the usual submit — reads
    nothing first, so its row is one insert that shares its commit with concurrent writes."""
    if key is not None or body.workflow_id is not None or body.dsl is None or body.webhook is not None or trigger:
        return await db.run(_create, user, body, key, grey, trigger)
    check_dsl(body.dsl)
    check_input(body.dsl, body.input)
    task = new_row(Task, **_task_values(user, body, body.dsl, None, None, grey))
    await db.run_grouped(insert_row, TASKS, task.model_dump())
    return task, True


def task_message(task: Task) -> TaskMessage:
    """The message of a task row; every row's DSL was validated before it was written (a
    submission's by `check_dsl`, a chat run's by the conversation queue), so it says so."""
    return TaskMessage(
        task_id=task.id,
        user_id=task.user_id,
        dsl=task.dsl,
        input=task.input or {},
        options=TaskOptions.model_validate(task.options or {}),
        session_id=task.session_id,
        guardrail_grey=list(task.guardrail_grey or []),
        retry=task.retry,
        dsl_checked=True,
    )


def _msg_id(task: Task) -> str:
    return task.id if task.retry == 0 else f"{task.id}:retry:{task.retry}"


def _mark_queued(conn: Connection, task_id: str, seq: int | None) -> None:
    # One statement on the table (a grouped write), not a load of the row (its DSL and input).
    conn.execute(TASKS.update().where(TASKS.c.id == task_id, TASKS.c.queued_at.is_(None))
                 .values(queued_at=now(), queue_seq=seq))


# How long a submit's publish rides through a leader election of the tasks stream (typically
# 4–9 s) before the request answers `queued: false` (the row is kept; the requeuer publishes it):
# an HTTP client is not kept waiting for the bus's full 30 s.
PUBLISH_WAIT_S = 10.0


async def queue_task(db: Database, bus: Bus | None, task: Task) -> bool:
    """Publish the task message; True once it is on the stream. On failure (no leader within
    PUBLISH_WAIT_S) the row stays `submitted` and unqueued, and `requeue_unpublished` publishes it."""
    if bus is None or not bus.connected:
        log.warning("task %s kept for later: the message bus is not connected", task.id)
        return False
    try:
        ack = await bus.js_publish(bus.subjects.tasks_submit, task_message(task), msg_id=_msg_id(task),
                                   retry_for_s=PUBLISH_WAIT_S)
    except Exception as exc:
        log.warning("task %s kept for later: publish failed: %s", task.id, exc)
        return False
    await db.run_grouped(_mark_queued, task.id, None if ack.duplicate else ack.seq)
    return True


BeforeQueue = Callable[[Task], Awaitable[None]]  # runs once a new task's row is written, before it is published


async def submit(
    db: Database, bus: Bus | None, user: Principal, body: SubmitTask, key: str | None, grey: list[str],
    before_queue: BeforeQueue | None = None, trigger: dict[str, Any] | None = None,
) -> tuple[Task, bool, bool]:
    """Returns (task, created, queued). `before_queue` runs once a new task's row is written,
    before its message is published (e.g. to start reading its events); `trigger` is what
    started it when no person did (`_task_values`)."""
    if key is not None and not 1 <= len(key) <= 255:
        raise ApiProblem(400, "Bad Request", "Idempotency-Key must be 1 to 255 characters.")
    try:
        task, created = await _create_task(db, user, body, key, grey, trigger)
    except (IntegrityError, _KeyTaken):
        # The same key raced in from a parallel request: answer with the winner's task.
        winner = await db.run(lambda s: _existing_for_key(s, user.id, key or ""))
        if winner is None:
            raise
        task = winner
        created = False
    if created and before_queue is not None:
        await before_queue(task)
    queued = await queue_task(db, bus, task) if created else task.queued_at is not None or task.status != "submitted"
    return task, created, queued


def _unqueued(session: Session, min_age: timedelta, limit: int) -> list[Task]:
    """Rows not yet on the stream and not started (oldest first). The age counts from the last
    change, so a task reopened by a retry is left to its own publish for a while too."""
    changed = func.coalesce(col(Task.updated_at), col(Task.created_at))
    query = (
        select(Task)
        .where(col(Task.queued_at).is_(None), Task.status == "submitted", changed <= now() - min_age)
        .order_by(col(Task.created_at))
        .limit(limit)
    )
    return list(session.exec(query))


async def requeue_unpublished(db: Database, bus: Bus, min_age_s: float) -> int:
    """Publish rows left unqueued (same Nats-Msg-Id, so a message that did get out before is
    dropped as a duplicate within the stream's dedupe window). Stops at the first failure:
    the bus is down again and the next pass retries."""
    count = 0
    while bus.connected:
        batch = await db.run(_unqueued, timedelta(seconds=min_age_s), REQUEUE_BATCH)
        for task in batch:
            try:
                ack = await bus.js_publish(bus.subjects.tasks_submit, task_message(task), msg_id=_msg_id(task))
            except Exception as exc:
                log.warning("re-publishing %s failed: %s", task.id, exc)
                return count
            await db.run_grouped(_mark_queued, task.id, None if ack.duplicate else ack.seq)
            count += 1
        if len(batch) < REQUEUE_BATCH:
            break
    if count:
        log.info("re-published %d task(s) left unqueued", count)
    return count


# ---- actions -------------------------------------------------------------------------------


async def cancel(db: Database, bus: Bus, user: Principal, task_id: str) -> Task:
    task = await db.run(load_owned, user, task_id)
    if task.status in TERMINAL:
        raise ApiProblem(409, "Conflict", f"Task {task_id} already ended ({task.status}).")
    await bus.publish(bus.subjects.cancel(task_id), CancelMessage(task_id=task_id, by=user.id))
    if task.status == "submitted":
        # Still queued: take the message off the work queue so no dispatcher starts it (if one
        # has just pulled it, the cancel above stops it), and end the task in its event log so
        # the record and SSE readers follow.
        if task.queue_seq is not None:
            with contextlib.suppress(Exception):  # already delivered and acked, or gone
                await bus.js.delete_msg(bus.names.tasks_stream, task.queue_seq)
        publisher = EventPublisher(bus, task_id, start_n=await last_event_n(bus, task_id))
        reason = f"cancelled by {user.id} before it started"
        await finish_task(publisher, task_id, "cancelled", error=reason, code="cancelled", retry=task.retry)
    return task


def _reopen(session: Session, user: Principal, task_id: str) -> Task:
    task = load_owned(session, user, task_id)
    if session.get(ChatRun, task_id) is not None:
        # A chat run belongs to its conversation's order: rerunning it here would answer out of turn.
        raise ApiProblem(409, "Conflict", "This task is a chat run: send the message to its conversation again.")
    if task.status not in RETRYABLE:
        raise ApiProblem(409, "Conflict", f"Only failed or timed-out tasks can be retried ({task.status}).")
    task.retry += 1
    task.status = "submitted"
    task.finished_at = None
    task.error = task.error_code = None
    task.output = None
    task.queued_at = task.queue_seq = None
    task.updated_at = now()
    session.add(task)
    return task


async def retry(db: Database, bus: Bus | None, user: Principal, task_id: str) -> tuple[Task, bool]:
    """Returns (task, queued); an unqueued retry is re-published like an unqueued submit."""
    task = await db.run(_reopen, user, task_id)
    return task, await queue_task(db, bus, task)
