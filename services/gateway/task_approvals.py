"""A person's decision on a task that waits for approval: which node it goes to, and the resume
message that carries it to the dispatcher running the task (`P.tasks.resume`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, select

from services.gateway.db import Database
from services.gateway.principal import Principal
from services.gateway.problems import ApiProblem
from services.gateway.tables import Task, TaskNode
from services.gateway.task_service import load_owned
from shared.bus import Bus
from shared.bus.events import last_event, last_event_n
from shared.contract.events import StatusEvent
from shared.contract.task import ResumeMessage

# The row statuses a task's record can lag in while its log already says `waiting`.
LAGGING = frozenset({"submitted", "running"})


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    comment: str | None = Field(default=None, max_length=4000)
    node_id: str | None = Field(default=None, max_length=64)


def _waiting_node(session: Session, task: Task, node_id: str | None) -> str:
    waiting = [
        n.node_id
        for n in session.exec(select(TaskNode).where(TaskNode.task_id == task.id, TaskNode.status == "waiting"))
    ]
    if not waiting:  # the recorder may lag behind: fall back to the graph's approval nodes
        waiting = [
            n["id"]
            for n in (task.dsl or {}).get("nodes", [])
            if isinstance(n, dict) and n.get("kind") == "approval" and isinstance(n.get("id"), str)
        ]
    if node_id is not None:
        if node_id not in waiting:
            raise ApiProblem(409, "Conflict", f"Node {node_id!r} is not waiting for approval.")
        return node_id
    if len(waiting) != 1:
        raise ApiProblem(
            422,
            "Invalid request",
            f"{len(waiting)} approvals are waiting ({', '.join(waiting)}); name one with `node_id`.",
        )
    return waiting[0]


def _approval_target(session: Session, user: Principal, task_id: str, node_id: str | None,
                     waits_on_bus: bool = False) -> str:
    """The node a decision goes to. `waits_on_bus`: the task's event log already says `waiting`
    while its row may lag behind (the recorder has not applied that event yet) — a person who
    saw the approval request must be able to answer it at once, whether the row still says
    `running` or has not even seen the task start (`submitted`)."""
    task = load_owned(session, user, task_id)
    if task.status != "waiting" and not (waits_on_bus and task.status in LAGGING):
        raise ApiProblem(409, "Conflict", f"Task {task_id} is not waiting for approval ({task.status}).")
    return _waiting_node(session, task, node_id)


async def _waits_on_bus(bus: Bus, task_id: str) -> bool:
    last = await last_event(bus, task_id, "status")
    return isinstance(last, StatusEvent) and last.status == "waiting"


async def approve(db: Database, bus: Bus, user: Principal, task_id: str, body: Approval) -> str:
    try:
        node_id = await db.run(_approval_target, user, task_id, body.node_id)
    except ApiProblem as exc:
        if exc.status != 409 or not await _waits_on_bus(bus, task_id):
            raise
        node_id = await db.run(_approval_target, user, task_id, body.node_id, True)
    message = ResumeMessage(task_id=task_id, node_id=node_id, decision=body.decision, by=user.id, comment=body.comment)
    # The same wait decided twice (a double click) is one message; a later wait of the same node
    # (an agent's next high-risk tool call) is another: the event log has moved on since.
    wait = await last_event_n(bus, task_id)
    await bus.js_publish(bus.subjects.tasks_resume, message, msg_id=f"{task_id}:resume:{node_id}:{wait}")
    return node_id
