"""How task events move the task record: the state machine applied by the recorder.

Idempotent and order-tolerant: a repeated or out-of-order status transition is ignored
(`can_transition`), node rows never regress from a finished state to an older one, and events of
a superseded run (`retry` lower than the record's) are dropped.

A task ends by its `done` event alone, which carries the result: its terminal status, output or
error and usage become visible together, in one write. The terminal `status` event just before
it moves nothing (the two may be applied in different batches, and a reader between them would
see a task ended without its result).

The rows are read and written with SQLAlchemy Core, as plain records: the recorder applies every
task's status and node events, and building ORM objects for them (each attribute set through
pydantic and SQLAlchemy's instrumentation, then the unit of work's flush) cost the gateway about
three times what the statements themselves do."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy import BindParameter, Connection, Table, bindparam, select
from sqlmodel import Session

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
# sqlmodel does not declare `__table__`
TASKS: Table = Task.__table__  # type: ignore[attr-defined]
NODES: Table = TaskNode.__table__  # type: ignore[attr-defined]


@dataclass(slots=True)
class _TaskRecord:
    """The columns of a task row that events move (and `id`, `retry` that they are checked by)."""

    id: str
    status: str
    retry: int
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    error_code: str | None
    output: Any
    usage: Any
    chain_revision: int | None
    prompt_versions: Any


@dataclass(slots=True)
class _NodeRecord:
    task_id: str
    node_id: str
    kind: str | None = None
    status: str = "pending"
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: float | None = None
    error: str | None = None
    output_preview: str | None = None


TASK_NAMES = tuple(f.name for f in fields(_TaskRecord))
NODE_NAMES = tuple(f.name for f in fields(_NodeRecord))
TASK_COLUMNS = tuple(TASKS.c[name] for name in TASK_NAMES)
NODE_COLUMNS = tuple(NODES.c[name] for name in NODE_NAMES)
# A record's values, in its fields' order (the state machine replaces values, never changes one
# in place, so comparing these tuples tells what changed).
task_values = attrgetter(*TASK_NAMES)
node_values = attrgetter(*NODE_NAMES)
TASK_KEYS = ("id",)
NODE_KEYS = ("task_id", "node_id")
# Each batch's reads and its lock, built once: `ids` expands to the batch's task ids when run
# (building them per batch, the IN clauses' coercion and cache keys, was a tenth of a batch).
_IDS: BindParameter[Any] = bindparam("ids", expanding=True)
TOUCH_TASKS = TASKS.update().where(TASKS.c.id.in_(_IDS)).values(
    updated_at=bindparam("updated_at", type_=TASKS.c.updated_at.type))
READ_TASKS = select(*TASK_COLUMNS).where(TASKS.c.id.in_(_IDS)).with_for_update()
READ_NODES = select(*NODE_COLUMNS).where(NODES.c.task_id.in_(_IDS))


@dataclass(slots=True)
class _Batch:
    """One batch's rows as read, and what applying its events made of them."""

    conn: Connection
    tasks: dict[str, _TaskRecord]
    nodes: dict[str, dict[str, _NodeRecord]]
    read: dict[tuple[str, ...], tuple[Any, ...]]  # each row's values as read (new nodes absent)
    dsl: dict[str, dict[str, Any] | None]  # task DSLs, read only for a node event without a kind

    def node(self, task: _TaskRecord, node_id: str, kind: str | None = None) -> _NodeRecord:
        node = self.nodes[task.id].get(node_id)
        if node is None:
            node = self.nodes[task.id][node_id] = _NodeRecord(task.id, node_id, kind or self._kind(task.id, node_id))
        return node

    def _kind(self, task_id: str, node_id: str) -> str | None:
        if task_id not in self.dsl:
            self.dsl[task_id] = self.conn.execute(select(TASKS.c.dsl).where(TASKS.c.id == task_id)).scalar()
        return _kind_from_dsl(self.dsl[task_id], node_id)


def apply_events(session: Session, events: Iterable[AnyEvent]) -> set[str]:
    """Apply events (in stream order) to their task rows; returns the ids of the tasks whose
    record changed. Events of unknown tasks (e.g. ingestion jobs share the stream) are ignored."""
    by_task: dict[str, list[AnyEvent]] = defaultdict(list)
    for event in events:
        by_task[event.task_id].append(event)
    if not by_task:
        return set()
    conn = session.connection()
    ids = list(by_task)
    # Another replica may be applying events of the same tasks: the rows are written first (their
    # `updated_at`), because on SQLite, which has no row locks, only a write makes the other
    # writer wait — and reading afterwards sees its nodes, instead of inserting them a second
    # time. On PostgreSQL the UPDATE locks the rows as `SELECT … FOR UPDATE` does.
    conn.execute(TOUCH_TASKS, {"ids": ids, "updated_at": now()})
    batch = _Batch(conn, {}, defaultdict(dict), {}, {})
    for row in conn.execute(READ_TASKS, {"ids": ids}):
        batch.tasks[row.id] = _TaskRecord(*row)
        batch.read[(row.id,)] = tuple(row)
    for row in conn.execute(READ_NODES, {"ids": list(batch.tasks)}):
        batch.nodes[row.task_id][row.node_id] = _NodeRecord(*row)
        batch.read[(row.task_id, row.node_id)] = tuple(row)
    for task_id, task_events in by_task.items():
        found = batch.tasks.get(task_id)
        if found is None:
            continue
        for event in task_events:
            _apply(batch, found, event)
    return _write(batch)


def _write(batch: _Batch) -> set[str]:
    """One statement per kind of change, each run for every row it concerns; the ids of the tasks
    whose record changed."""
    tasks: list[dict[str, Any]] = []
    for task in batch.tasks.values():
        values = task_values(task)
        if values != batch.read[(task.id,)]:
            tasks.append(dict(zip(TASK_NAMES, values, strict=True)))
    new: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    for per_task in batch.nodes.values():
        for node in per_task.values():
            values, before = node_values(node), batch.read.get((node.task_id, node.node_id))
            if before is None:
                new.append(dict(zip(NODE_NAMES, values, strict=True)))
            elif values != before:
                moved.append(dict(zip(NODE_NAMES, values, strict=True)))
    if tasks:
        batch.conn.execute(_update(TASKS, TASK_COLUMNS, TASK_KEYS), [_keyed(v, TASK_KEYS) for v in tasks])
    if new:
        batch.conn.execute(NODES.insert(), new)
    if moved:
        batch.conn.execute(_update(NODES, NODE_COLUMNS, NODE_KEYS), [_keyed(v, NODE_KEYS) for v in moved])
    return {v["id"] for v in tasks} | {v["task_id"] for v in new} | {v["task_id"] for v in moved}


def _update(table: Table, columns: tuple[Any, ...], keys: tuple[str, ...]) -> Any:
    """`UPDATE table SET <columns> WHERE <keys>` for many rows: the keys' parameters are named
    `key_<name>`, apart from the values' own."""
    where = [table.c[k] == bindparam(f"key_{k}") for k in keys]
    return table.update().where(*where).values({c.name: bindparam(c.name) for c in columns if c.name not in keys})


def _keyed(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return values | {f"key_{k}": values[k] for k in keys}


def _stale_run(task: _TaskRecord, event: AnyEvent) -> bool:
    retry = getattr(event, "retry", None)
    return retry is not None and retry < task.retry


def _set_status(task: _TaskRecord, new: str, event: StatusEvent | DoneEvent) -> bool:
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


def _apply(batch: _Batch, task: _TaskRecord, event: AnyEvent) -> bool:
    if _stale_run(task, event):
        return False
    if isinstance(event, StatusEvent):
        if event.status in TERMINAL:
            return False  # the `done` that follows ends the record, with the result
        changed = _set_status(task, event.status, event)
        if changed and event.status == "running":
            if event.chain_revision is not None:
                task.chain_revision = event.chain_revision
            if event.prompt_versions is not None:
                task.prompt_versions = event.prompt_versions
        if changed and event.usage is not None:  # usage so far (a parked task); `done` has the total
            task.usage = event.usage.model_dump(mode="json")
        return changed
    if isinstance(event, DoneEvent):
        if not _set_status(task, event.status, event):
            return False
        task.output = event.output
        if event.usage is not None:
            task.usage = event.usage.model_dump(mode="json")
        if event.error:
            task.error, task.error_code = event.error, event.code
        return True
    if isinstance(event, ErrorEvent):
        if event.node_id:
            batch.node(task, event.node_id).error = event.message
        elif task.error is None:
            task.error, task.error_code = event.message, event.code
        return True
    if event.node_id is None:
        return False
    return _apply_node(batch, task, event)


def _apply_node(batch: _Batch, task: _TaskRecord, event: AnyEvent) -> bool:
    assert event.node_id is not None
    node = batch.node(task, event.node_id, getattr(event, "kind", None))
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
    return True


def _after(ts: datetime, other: datetime | None) -> bool:
    return other is None or ts > (aware(other) or other)


def _kind_from_dsl(dsl: dict[str, Any] | None, node_id: str) -> str | None:
    for item in (dsl or {}).get("nodes", []) or []:
        if isinstance(item, dict) and item.get("id") == node_id:
            kind = item.get("kind")
            return kind if isinstance(kind, str) else None
    return None
