"""How task events move the task record: the state machine applied by the recorder.

Idempotent and order-tolerant: a repeated or out-of-order status transition is ignored
(`can_transition`), node rows never regress from a finished state to an older one, and events of
a superseded run (`retry` lower than the record's) are dropped."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy.orm import defer
from sqlmodel import Session, col, select, update

from services.gateway.tables import Task, TaskNode, aware, now
from shared.contract.events import (
    AnyEvent,
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    DoneEvent,
    ErrorEvent,
    NodeEndEvent,
    NodeSkipEvent,
    NodeStartEvent,
    StatusEvent,
)
from shared.contract.task import TERMINAL, can_transition

NODE_FINISHED = frozenset({"done", "failed", "cancelled", "skipped"})
PREVIEW_CHARS = 2000


def apply_events(session: Session, events: Iterable[AnyEvent]) -> int:
    """Apply events (in stream order) to their task rows; returns how many changed something.
    Events of unknown tasks (e.g. ingestion jobs share the stream) are ignored."""
    by_task: dict[str, list[AnyEvent]] = defaultdict(list)
    for event in events:
        by_task[event.task_id].append(event)
    if not by_task:
        return 0
    # Another replica may be applying events of the same tasks: the rows are written first (their
    # `updated_at`), because on SQLite, which has no row locks, only a write makes the other
    # writer wait — and reading afterwards sees its nodes, instead of inserting them a second
    # time. On PostgreSQL the UPDATE locks the rows as `SELECT … FOR UPDATE` does.
    session.execute(update(Task).where(col(Task.id).in_(list(by_task))).values(updated_at=now()))
    # What the events never read stays in the database (a task's input can be large). The
    # ignore: sqlmodel types a column attribute as its Python type, not as SQLAlchemy's attribute.
    query = (select(Task).where(col(Task.id).in_(list(by_task))).with_for_update()
             .options(defer(Task.input), defer(Task.options), defer(Task.guardrail_grey)))  # type: ignore[arg-type]
    tasks = {t.id: t for t in session.exec(query.execution_options(populate_existing=True))}
    nodes: dict[str, dict[str, TaskNode]] = defaultdict(dict)
    for node in session.exec(select(TaskNode).where(col(TaskNode.task_id).in_(list(tasks)))):
        nodes[node.task_id][node.node_id] = node
    changed = 0
    for task_id, task_events in by_task.items():
        task = tasks.get(task_id)
        if task is None:
            continue
        for event in task_events:
            if _apply(session, task, nodes[task_id], event):
                changed += 1
        session.add(task)
    return changed


def _stale_run(task: Task, event: AnyEvent) -> bool:
    retry = getattr(event, "retry", None)
    return retry is not None and retry < task.retry


def _set_status(task: Task, new: str, event: StatusEvent | DoneEvent) -> bool:
    retry = getattr(event, "retry", None)
    reopening = retry is not None and retry > task.retry
    if task.status == new or not can_transition(task.status, new, retry=reopening):
        return False
    if reopening:
        task.retry = retry or task.retry
        task.finished_at = None
        task.error = task.error_code = None
    task.status = new
    ts = aware(event.ts) or now()
    if new == "running" and task.started_at is None:
        task.started_at = ts
    if new in TERMINAL:
        task.finished_at = ts
    return True


def _apply(session: Session, task: Task, nodes: dict[str, TaskNode], event: AnyEvent) -> bool:
    if _stale_run(task, event):
        return False
    if isinstance(event, StatusEvent):
        changed = _set_status(task, event.status, event)
        if changed and event.status == "running":
            if event.chain_revision is not None:
                task.chain_revision = event.chain_revision
            if event.prompt_versions is not None:
                task.prompt_versions = event.prompt_versions
        if changed and event.status in TERMINAL and event.error:
            task.error, task.error_code = event.error, event.code
        if changed and event.usage is not None:  # usage so far (a parked task); `done` has the total
            task.usage = event.usage.model_dump(mode="json")
        return changed
    if isinstance(event, DoneEvent):
        was_terminal = task.status in TERMINAL
        changed = _set_status(task, event.status, event)
        # `done` carries the result; it may follow its own terminal `status` event.
        if changed or (was_terminal and task.status == event.status and task.output is None):
            task.output = event.output
            if event.usage is not None:
                task.usage = event.usage.model_dump(mode="json")
            if event.error:
                task.error = event.error
            return True
        return changed
    if isinstance(event, ErrorEvent):
        if event.node_id:
            node = _node(session, task, nodes, event.node_id)
            node.error = event.message
            session.add(node)
        elif task.error is None:
            task.error, task.error_code = event.message, event.code
        return True
    if event.node_id is None:
        return False
    return _apply_node(session, task, nodes, event)


def _apply_node(session: Session, task: Task, nodes: dict[str, TaskNode], event: AnyEvent) -> bool:
    assert event.node_id is not None
    node = _node(session, task, nodes, event.node_id, getattr(event, "kind", None))
    ts = aware(event.ts) or now()
    finished_before = node.status in NODE_FINISHED and not _after(ts, node.finished_at)
    if isinstance(event, NodeStartEvent):
        if finished_before or node.status == "running":
            return False
        node.status, node.kind, node.started_at = "running", event.kind, ts
        node.finished_at = node.error = None
    elif isinstance(event, NodeEndEvent):
        if node.status in NODE_FINISHED and node.finished_at is not None and not _after(ts, node.finished_at):
            return False
        node.status = event.status
        node.kind = event.kind or node.kind
        node.finished_at = ts
        node.duration_ms = event.duration_ms
        node.error = event.error
        if event.output_preview is not None:
            node.output_preview = event.output_preview[:PREVIEW_CHARS]
    elif isinstance(event, NodeSkipEvent):
        if node.status in NODE_FINISHED:
            return False
        node.status, node.finished_at = "skipped", ts
    elif isinstance(event, ApprovalRequestEvent):
        if finished_before or node.status == "waiting":
            return False
        node.status = "waiting"
    elif isinstance(event, ApprovalDecisionEvent):
        if node.status != "waiting":
            return False
        node.status = "running"
    else:
        return False
    session.add(node)
    return True


def _after(ts: datetime, other: datetime | None) -> bool:
    return other is None or ts > (aware(other) or other)


def _node(session: Session, task: Task, nodes: dict[str, TaskNode], node_id: str, kind: str | None = None) -> TaskNode:
    node = nodes.get(node_id)
    if node is None:
        node = TaskNode(task_id=task.id, node_id=node_id, kind=kind or _kind_from_dsl(task.dsl, node_id))
        nodes[node_id] = node
        session.add(node)
    return node


def _kind_from_dsl(dsl: dict[str, Any] | None, node_id: str) -> str | None:
    for item in (dsl or {}).get("nodes", []) or []:
        if isinstance(item, dict) and item.get("id") == node_id:
            kind = item.get("kind")
            return kind if isinstance(kind, str) else None
    return None
