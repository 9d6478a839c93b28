"""An approval answered before the recorder has applied the task's `waiting` event (or its node's
`approval.request`): the person saw the request on the stream, so the decision is taken and goes
to the node the event log says waits — and it is refused when the log does not say so."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.migrate import upgrade_engine
from services.gateway.problems import ApiProblem
from services.gateway.runs import approvals as task_approvals
from services.gateway.tables import Task
from shared.bus import Bus
from shared.bus.events import EventPublisher
from shared.contract.events import ApprovalDecisionEvent, ApprovalRequestEvent, StatusEvent
from shared.contract.task import ResumeMessage

DSL = {"version": "1", "nodes": [{"id": "in", "kind": "input"}, {"id": "gate", "kind": "approval"}],
       "edges": [{"source": "in", "target": "gate"}]}
ALICE = Principal("alice")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'gw.db'}")
    upgrade_engine(database.engine)
    yield database
    database.close()


def running_task(db: Database, status: str = "running") -> str:
    task_id = f"t_{uuid.uuid4().hex[:12]}"
    with db.session() as s:
        s.add(Task(id=task_id, user_id=ALICE.id, status=status, dsl=DSL))
        s.commit()
    return task_id


@pytest.mark.parametrize("row_status", ["running", "submitted"])
async def test_a_decision_is_taken_while_the_row_lags_behind_the_log(db: Database, bus: Bus, row_status: str) -> None:
    task_id = running_task(db, row_status)
    events = EventPublisher(bus, task_id)
    await events.emit(StatusEvent(task_id=task_id, status="running"))
    await events.emit(ApprovalRequestEvent(task_id=task_id, node_id="gate", message="go?"))
    await events.emit(StatusEvent(task_id=task_id, status="waiting"))
    await events.flush()

    node = await task_approvals.approve(db, bus, ALICE, task_id, task_approvals.Approval(decision="approve"))

    assert node == "gate"
    msg = await bus.js.get_last_msg(bus.names.tasks_stream, bus.subjects.tasks_resume)
    resume = ResumeMessage.model_validate_json(msg.data)
    assert (resume.task_id, resume.node_id, resume.decision, resume.by) == (task_id, "gate", "approve", "alice")


async def test_a_running_task_whose_log_does_not_wait_refuses_a_decision(db: Database, bus: Bus) -> None:
    task_id = running_task(db)
    events = EventPublisher(bus, task_id)
    await events.emit(StatusEvent(task_id=task_id, status="running"))
    await events.flush()
    with pytest.raises(ApiProblem) as refused:
        await task_approvals.approve(db, bus, ALICE, task_id, task_approvals.Approval(decision="approve"))
    assert refused.value.status == 409 and "not waiting" in refused.value.detail


async def test_an_agents_tool_approval_is_found_in_the_log_while_its_node_row_lags(db: Database, bus: Bus) -> None:
    """The row already says `waiting` but the agent node's row does not yet (an agent is no
    approval node of the graph, so the graph cannot name it): the log's request names it, and
    a wait decided earlier in the log is not offered again."""
    task_id = running_task(db, "waiting")
    events = EventPublisher(bus, task_id)
    await events.emit(StatusEvent(task_id=task_id, status="running"))
    await events.emit(ApprovalRequestEvent(task_id=task_id, node_id="gate", message="go?"))
    await events.emit(ApprovalDecisionEvent(task_id=task_id, node_id="gate", decision="approve", by="alice"))
    await events.emit(ApprovalRequestEvent(task_id=task_id, node_id="act", message="allow wipe?", call_id="w1",
                                           tool="wipe", args={"path": "/"}))
    await events.emit(StatusEvent(task_id=task_id, status="waiting"))
    await events.flush()

    node = await task_approvals.approve(db, bus, ALICE, task_id, task_approvals.Approval(decision="reject"))

    assert node == "act"


async def test_a_retry_forgets_the_waits_of_the_run_before(db: Database, bus: Bus) -> None:
    task_id = running_task(db)
    events = EventPublisher(bus, task_id)
    await events.emit(ApprovalRequestEvent(task_id=task_id, node_id="gate", message="go?"))  # the run then failed
    await events.emit(StatusEvent(task_id=task_id, status="running", retry=1))
    await events.emit(ApprovalRequestEvent(task_id=task_id, node_id="act", message="allow wipe?"))
    await events.emit(StatusEvent(task_id=task_id, status="waiting", retry=1))
    await events.flush()

    node = await task_approvals.approve(db, bus, ALICE, task_id, task_approvals.Approval(decision="approve"))

    assert node == "act"
