"""A person's decision on a task that waits for approval: which node it goes to, and the resume
message that carries it to the dispatcher running the task (`P.tasks.resume`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlmodel import Session, select

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.runs.views import load_owned
from services.gateway.tables import Task, TaskNode
from shared.bus import Bus
from shared.bus.events import last_event, last_event_n, read_events
from shared.contract.events import ApprovalDecisionEvent, ApprovalRequestEvent, NodeEndEvent, StatusEvent
from shared.contract.task import ResumeMessage

# The row statuses a task's record can lag in while its log already says `waiting`.
LAGGING = frozenset({"submitted", "running"})


class Approval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    comment: str | None = Field(default=None, max_length=4000)
    node_id: str | None = Field(default=None, max_length=64)
    # A high-risk tool call approved with these arguments instead of the model's (an edit).
    args: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _args_approve(self) -> Approval:
        if self.args is not None and self.decision != "approve":
            raise ValueError("`args` edits a call that is approved: the decision must be `approve`")
        return self


async def _check_edit(bus: Bus, task_id: str, node_id: str) -> None:
    """Edited arguments go to a tool call's approval only (an approval node has no call)."""
    request = await last_event(bus, task_id, "exec")
    if not isinstance(request, ApprovalRequestEvent) or request.node_id != node_id or request.call_id is None:
        raise ApiProblem(422, "Invalid request", "`args` is not supported here: the approval waiting is not a tool "
                                                 "call's (only a tool call's arguments can be edited).",
                         errors=[{"code": "unsupported", "field": "args", "message": "not a tool call's approval"}])


def _waiting_node(session: Session, task: Task, node_id: str | None, in_log: list[str] | None) -> str:
    """The node a decision goes to: named, or the only one waiting. `in_log`: the nodes the task's
    event log says wait, for when the record lags behind the log (its node rows not yet waiting)."""
    waiting = [
        n.node_id
        for n in session.exec(select(TaskNode).where(TaskNode.task_id == task.id, TaskNode.status == "waiting"))
    ]
    if not waiting and in_log:
        waiting = in_log
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
                     in_log: list[str] | None = None) -> str:
    """The node a decision goes to. `in_log` (the nodes waiting by the task's event log, which
    already says `waiting`): the task's row may lag behind — the recorder has not applied those
    events yet — and a person who saw the approval request must be able to answer it at once,
    whether the row still says `running` or has not even seen the task start (`submitted`)."""
    task = load_owned(session, user, task_id)
    if task.status != "waiting" and not (in_log is not None and task.status in LAGGING):
        raise ApiProblem(409, "Conflict", f"Task {task_id} is not waiting for approval ({task.status}).")
    return _waiting_node(session, task, node_id, in_log)


async def _waiting_in_log(bus: Bus, task_id: str) -> list[str] | None:
    """The nodes waiting for a decision by the task's event log (approval requests neither decided
    nor ended since), or None when its last status is not `waiting`."""
    last = await last_event(bus, task_id, "status")
    if not (isinstance(last, StatusEvent) and last.status == "waiting"):
        return None
    waiting: dict[str, None] = {}  # an ordered set
    run = 0
    async for _, event in read_events(bus, task_id, channels=("status", "exec"), follow=False):
        if isinstance(event, StatusEvent) and (event.retry or 0) > run:
            run, waiting = event.retry or 0, {}  # a retry starts afresh: earlier waits are over
        elif isinstance(event, ApprovalRequestEvent) and event.node_id:
            waiting[event.node_id] = None
        elif isinstance(event, ApprovalDecisionEvent | NodeEndEvent) and event.node_id:
            waiting.pop(event.node_id, None)
    return list(waiting)


async def approve(db: Database, bus: Bus, user: Principal, task_id: str, body: Approval) -> str:
    try:
        node_id = await db.run(_approval_target, user, task_id, body.node_id)
    except ApiProblem as exc:
        in_log = await _waiting_in_log(bus, task_id) if exc.status in (409, 422) else None
        if in_log is None:
            raise
        node_id = await db.run(_approval_target, user, task_id, body.node_id, in_log)
    if body.args is not None:
        await _check_edit(bus, task_id, node_id)
    message = ResumeMessage(task_id=task_id, node_id=node_id, decision=body.decision, by=user.id, comment=body.comment,
                            args=body.args)
    # The same wait decided twice (a double click) is one message; a later wait of the same node
    # (an agent's next high-risk tool call) is another: the event log has moved on since.
    wait = await last_event_n(bus, task_id)
    await bus.js_publish(bus.subjects.tasks_resume, message, msg_id=f"{task_id}:resume:{node_id}:{wait}")
    return node_id
