"""Task records as the API shows them: one task (with its nodes), a page of tasks, and the status
that opening a task's stream needs. Reads only: the recorder alone writes what events move, and a
view that must not be behind the task's stream waits for it (`recorded.RecordWatch`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.pagination import Page, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from services.gateway.runs.recorded import RecordWatch
from services.gateway.tables import Task, TaskNode, aware
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import AnyEvent, DoneEvent, StatusEvent
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.tasks")


def not_found(task_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No task {task_id!r}.")


def links(task_id: str) -> dict[str, str]:
    base = f"/api/v1/tasks/{task_id}"
    return {"self": base, "events": f"{base}/events", "stream": f"{base}/stream", "exec": f"{base}/exec"}


def load_owned(session: Session, user: Principal, task_id: str) -> Task:
    task = session.get(Task, task_id)
    if task is None or not user.can_see(task.user_id):
        raise not_found(task_id)  # another user's task is indistinguishable from none
    return task


def owned_status(session: Session, user: Principal, task_id: str) -> str:
    """The status of a task `user` may see (404 as `load_owned`), reading two columns, not the row:
    what opening a task's stream needs."""
    row = session.exec(select(Task.user_id, Task.status).where(Task.id == task_id)).one_or_none()
    if row is None or not user.can_see(row[0]):
        raise not_found(task_id)
    return row[1]


def usage_view(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    out = {
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": int(usage.get("completion_tokens", 0)),
        "cost": float(usage.get("cost", 0.0)),
    }
    if usage.get("models"):
        out["models"] = usage["models"]
    return out


def node_views(task: Task, rows: Sequence[TaskNode]) -> list[dict[str, Any]]:
    by_id = {r.node_id: r for r in rows}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in (task.dsl or {}).get("nodes", []):
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            node_id = item["id"]
            seen.add(node_id)
            out.append(_node_view(node_id, item.get("kind"), by_id.get(node_id)))
    out.extend(_node_view(r.node_id, r.kind, r) for r in rows if r.node_id not in seen)
    return out


def _node_view(node_id: str, kind: Any, row: TaskNode | None) -> dict[str, Any]:
    return {
        "id": node_id,
        "kind": (row.kind if row and row.kind else kind),
        "status": row.status if row else "pending",
        "started_at": aware(row.started_at) if row else None,
        "finished_at": aware(row.finished_at) if row else None,
        "duration_ms": row.duration_ms if row else None,
        "error": row.error if row else None,
        "output_preview": row.output_preview if row else None,
    }


def summary(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "status": task.status,
        "user_id": task.user_id,
        "workflow_id": task.workflow_id,
        "created_at": aware(task.created_at),
        "started_at": aware(task.started_at),
        "finished_at": aware(task.finished_at),
        "error": task.error,
        "trigger": task.trigger,
        "usage": usage_view(task.usage),
        "links": links(task.id),
    }


def task_view(session: Session, user: Principal, task_id: str) -> dict[str, Any]:
    task = load_owned(session, user, task_id)
    rows = list(session.exec(select(TaskNode).where(TaskNode.task_id == task.id)))
    return {
        **summary(task),
        "input": task.input,
        "dsl": task.dsl,
        "options": task.options,
        "output": task.output,
        "error_code": task.error_code,
        "retry": task.retry,
        "chain_revision": task.chain_revision,
        "prompt_versions": task.prompt_versions,
        "guardrail_grey": task.guardrail_grey or [],
        "nodes": node_views(task, rows),
    }


async def current_task_view(db: Database, bus: Bus | None, watch: RecordWatch | None, user: Principal,
                            task_id: str) -> dict[str, Any]:
    """The task view, never behind the task's own stream: the recorder follows the events
    asynchronously, so a client that has just read `done` on the stream could otherwise fetch a
    task still `running`. When the newest status event is ahead of the row, the view waits until
    the recorder has written it (at most `recorded.WAIT_S`; then the record as it is)."""
    view = await db.run(task_view, user, task_id)
    if view["status"] in TERMINAL or bus is None or watch is None or not bus.nc.is_connected:
        return view  # a record ends with its result, in one write: an ended one is complete
    try:
        latest = await last_event(bus, task_id, "status")
    except Exception as exc:  # the bus is failing or an event is unreadable: the recorded view stands
        log.debug("no look at the log of %s: %s", task_id, exc)
        return view
    if not _ahead_of(latest, view):
        return view

    async def recorded() -> bool:
        # The record may pass the event read above (a resumed run records `running` and `done` in
        # one batch): it agrees once it has caught up with the log as the log stands now.
        nonlocal view
        view = await db.run(task_view, user, task_id)
        if view["status"] in TERMINAL or not _ahead_of(latest, view):
            return True
        try:
            now = await last_event(bus, task_id, "status")
        except Exception as exc:
            log.debug("no look at the log of %s: %s", task_id, exc)
            return False
        return not _ahead_of(now, view)

    await watch.until(task_id, recorded)
    return view


def _ahead_of(latest: AnyEvent | None, view: dict[str, Any]) -> bool:
    """The task's newest status-channel event says more than its row (an event of a run the row
    has been retried past says nothing)."""
    if isinstance(latest, DoneEvent):
        return view["status"] not in TERMINAL and (latest.retry or 0) >= view["retry"]
    if isinstance(latest, StatusEvent) and latest.status not in TERMINAL:
        return latest.status != view["status"] and (latest.retry or 0) >= view["retry"]
    return False


def list_tasks(session: Session, user: Principal, statuses: list[str] | None, limit: int, cursor: str | None) -> Page:
    query = select(Task).order_by(col(Task.id).desc()).limit(limit + 1)
    if not user.is_admin:
        query = query.where(Task.user_id == user.id)
    if statuses:
        query = query.where(col(Task.status).in_(statuses))
    if cursor:
        query = query.where(col(Task.id) < decode_cursor(cursor))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(items=[summary(t) for t in rows], next_cursor=encode_cursor(rows[-1].id) if more else None)
