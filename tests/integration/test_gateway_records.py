"""The recorder's state machine on real databases (SQLite and PostgreSQL): repeated and
out-of-order events are harmless, terminal states stick, a retry reopens; and the recorder
consumer acks only after the commit."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import text
from sqlmodel import select

from services.gateway.db import Database
from services.gateway.migrate import upgrade_engine
from services.gateway.runs.records import apply_events
from services.gateway.tables import Task, TaskNode, now
from shared.contract.events import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    DoneEvent,
    ErrorEvent,
    NodeEndEvent,
    NodeStartEvent,
    StatusEvent,
)
from shared.contract.models import Usage


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path / 'gw.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    database = Database(url)
    upgrade_engine(database.engine)
    yield database
    database.close()


def new_task(db: Database, status: str = "submitted") -> str:
    task_id = f"t_{uuid.uuid4().hex[:12]}"
    dsl = {"version": "1", "nodes": [{"id": "in", "kind": "input"}, {"id": "a", "kind": "agent"}], "edges": []}
    with db.session() as s:
        s.add(Task(id=task_id, user_id="u", status=status, dsl=dsl))
        s.commit()
    return task_id


def apply(db: Database, *events: object) -> Task:
    with db.session() as s:
        apply_events(s, events)  # type: ignore[arg-type]
        s.commit()
    with db.session() as s:
        task = s.get(Task, events[0].task_id)  # type: ignore[attr-defined]
        assert task is not None
        return task


def nodes(db: Database, task_id: str) -> dict[str, TaskNode]:
    with db.session() as s:
        return {n.node_id: n for n in s.exec(select(TaskNode).where(TaskNode.task_id == task_id))}


def test_happy_path_and_repeats_are_idempotent(db: Database) -> None:
    t = new_task(db)
    t0 = now()
    usage = Usage(prompt_tokens=3, completion_tokens=4, cost=0.5)
    later = [t0 + timedelta(seconds=i) for i in range(4)]
    events = [
        StatusEvent(task_id=t, status="running", chain_revision=7, prompt_versions={"sys": 2}, ts=t0),
        NodeStartEvent(task_id=t, node_id="a", kind="agent", ts=later[1]),
        NodeEndEvent(task_id=t, node_id="a", status="done", duration_ms=5, output_preview="hi", ts=later[2]),
        StatusEvent(task_id=t, status="done", ts=later[3]),
        DoneEvent(task_id=t, status="done", output={"o": 1}, usage=usage, ts=later[3]),
    ]
    first = apply(db, *events)
    again = apply(db, *events)  # redelivery of the whole batch
    for task in (first, again):
        assert task.status == "done"
        assert task.output == {"o": 1}
        assert task.usage["completion_tokens"] == 4
        assert task.chain_revision == 7 and task.prompt_versions == {"sys": 2}
    assert again.finished_at == first.finished_at
    node = nodes(db, t)["a"]
    assert node.status == "done" and node.output_preview == "hi" and node.duration_ms == 5


def test_out_of_order_and_terminal_states_stick(db: Database) -> None:
    t = new_task(db)
    t0 = now()
    apply(db, DoneEvent(task_id=t, status="cancelled", ts=t0))
    task = apply(db, StatusEvent(task_id=t, status="running", ts=t0 - timedelta(seconds=1)))
    assert task.status == "cancelled"
    task = apply(db, DoneEvent(task_id=t, status="done", output={"late": True}, ts=t0 + timedelta(seconds=1)))
    assert (task.status, task.output) == ("cancelled", None), "a terminal state never changes"
    # A late node.start after its node.end does not regress the node.
    apply(db, NodeEndEvent(task_id=t, node_id="a", status="failed", duration_ms=1, error="x", ts=t0))
    apply(db, NodeStartEvent(task_id=t, node_id="a", kind="agent", ts=t0 - timedelta(seconds=1)))
    assert nodes(db, t)["a"].status == "failed"


def test_waiting_and_retry(db: Database) -> None:
    t = new_task(db)
    t0 = now()
    apply(db, StatusEvent(task_id=t, status="running", ts=t0))
    apply(db, ApprovalRequestEvent(task_id=t, node_id="a", message="ok?", ts=t0))
    task = apply(db, StatusEvent(task_id=t, status="waiting", ts=t0))
    assert task.status == "waiting" and nodes(db, t)["a"].status == "waiting"
    apply(db, ApprovalDecisionEvent(task_id=t, node_id="a", decision="approve", by="u", ts=t0))
    task = apply(db, StatusEvent(task_id=t, status="running", ts=t0))
    assert task.status == "running" and nodes(db, t)["a"].status == "running"
    task = apply(db, DoneEvent(task_id=t, status="failed", error="boom", code="x", ts=t0))
    assert (task.status, task.error, task.error_code) == ("failed", "boom", "x")
    # The dispatcher's retry run reopens the record (retry counter above the record's).
    task = apply(db, StatusEvent(task_id=t, status="running", retry=1, ts=t0 + timedelta(seconds=5)))
    assert (task.status, task.retry, task.error, task.finished_at) == ("running", 1, None, None)
    task = apply(db, StatusEvent(task_id=t, status="waiting", retry=0, ts=t0))  # stale first run
    assert task.status == "running"


def test_a_terminal_status_is_recorded_with_its_result_in_one_write(db: Database) -> None:
    """The terminal `status` event moves nothing: applied alone (its `done` in the next batch),
    the record still says running, so no reader sees the task ended without its output or error."""
    done, failed = new_task(db, status="running"), new_task(db, status="running")
    t0 = now()
    before = apply(db, StatusEvent(task_id=done, status="done", ts=t0))
    assert (before.status, before.finished_at, before.output) == ("running", None, None)
    after = apply(db, DoneEvent(task_id=done, status="done", output={"answer": 42}, ts=t0))
    assert (after.status, after.output) == ("done", {"answer": 42}) and after.finished_at is not None
    before = apply(db, StatusEvent(task_id=failed, status="failed", error="boom", code="model_error", ts=t0))
    assert (before.status, before.error, before.error_code) == ("running", None, None)
    after = apply(db, DoneEvent(task_id=failed, status="failed", error="boom", code="model_error", ts=t0))
    assert (after.status, after.error, after.error_code) == ("failed", "boom", "model_error")


def test_a_node_first_named_by_an_event_without_a_kind_takes_its_kind_from_the_dsl(db: Database) -> None:
    t = new_task(db, status="running")
    t0 = now()
    apply(db, NodeEndEvent(task_id=t, node_id="a", status="done", duration_ms=2, ts=t0),
          ErrorEvent(task_id=t, node_id="in", code="x", message="the input was odd", ts=t0))
    recorded = nodes(db, t)
    assert (recorded["a"].kind, recorded["a"].status) == ("agent", "done")
    first_named_by_an_error = recorded["in"]
    assert (first_named_by_an_error.kind, first_named_by_an_error.status) == ("input", "pending")
    assert first_named_by_an_error.error == "the input was odd"


def test_events_of_unknown_tasks_are_ignored(db: Database) -> None:
    with db.session() as s:
        assert apply_events(s, [StatusEvent(task_id="job_x", status="running")]) == set()


def test_postgres_url_forms_are_accepted(pg_url: str) -> None:
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    database = Database(plain)
    try:
        with database.engine.connect() as conn:
            assert conn.execute(text("select 1")).scalar() == 1
    finally:
        database.close()


def test_two_replicas_recording_the_same_node_at_once_both_commit(db: Database) -> None:
    """Two gateway replicas apply batches of one task at the same time (the recorder's batches
    may overlap, a failed one is redelivered): the second must wait for the first and then see
    the node it created, not insert it again and fail on the unique key. Replica A holds its
    transaction open, written but not committed, until replica B is inside a statement that
    writes or locks (B's statements are watched on its engine); only then does A commit."""
    task_id = new_task(db, status="running")
    t0 = now()
    started = NodeStartEvent(task_id=task_id, node_id="a", kind="agent", ts=t0)
    ended = NodeEndEvent(task_id=task_id, node_id="a", status="done", duration_ms=5, ts=t0 + timedelta(seconds=1))
    second = Database(db.url)
    writing = threading.Event()

    @sqlalchemy_event.listens_for(second.engine, "before_cursor_execute")
    def _watch(conn: object, cursor: object, statement: str, *rest: object) -> None:
        sql = statement.lstrip().upper()
        if sql.startswith(("UPDATE", "INSERT")) or "FOR UPDATE" in sql:  # a statement that may wait for A
            writing.set()

    outcome: dict[str, object] = {}

    def replica_b() -> None:
        try:
            with second.session() as s:
                apply_events(s, [ended])
                s.commit()
            outcome["b"] = "committed"
        except Exception as exc:  # what the test reports, whatever it is
            outcome["b"] = exc

    try:
        with db.session() as a:
            apply_events(a, [started])
            a.flush()  # A's rows are written: it holds the write lock (SQLite) / the row lock
            b = threading.Thread(target=replica_b)
            b.start()
            assert writing.wait(30), "replica B never reached a writing statement"
            a.commit()
        b.join(60)
        assert outcome.get("b") == "committed", outcome
        assert nodes(db, task_id)["a"].status == "done"
    finally:
        second.close()
