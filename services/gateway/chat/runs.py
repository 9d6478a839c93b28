"""A chat run as the API shows it and acts on it: its view, cancel (a held run ends unrun, a
started one through its task), its approval, and stopping a deleted conversation's runs. Which
run goes when is the conversation queue's (`queue.py`)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlmodel import Session

from services.gateway.access.principal import Principal
from services.gateway.chat import conversations
from services.gateway.chat.queue import end_unrun, going
from services.gateway.chat.states import RUN_TERMINAL, move
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.runs import approvals as task_approvals
from services.gateway.runs import submit as tasks
from services.gateway.tables import Task, aware
from shared.bus import Bus

log = logging.getLogger("agentix.gateway.chat")


class RunApproval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    comment: str | None = Field(default=None, max_length=4000)
    args: dict[str, Any] | None = None  # a tool call approved with these arguments (an edit)

    @model_validator(mode="after")
    def _args_approve(self) -> RunApproval:
        if self.args is not None and self.decision != "approve":
            raise ValueError("`args` edits a call that is approved: the decision must be `approve`")
        return self


def not_found(run_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No run {run_id!r}.")


def view(session: Session, run: ChatRun) -> dict[str, Any]:
    position = 0
    if run.state not in RUN_TERMINAL:
        position = sum(1 for r in going(session, run.conversation_id) if r.seq < run.seq)
    return {
        "id": run.id,
        "conversation_id": run.conversation_id,
        "seq": run.seq,
        "mode": run.mode,
        "model": run.model,
        "state": run.state,
        "position": position,
        "created_at": aware(run.created_at),
        "ended_at": aware(run.ended_at),
        "links": {"self": f"/api/v1/runs/{run.id}", "events": f"/api/v1/runs/{run.id}/events"},
    }


def going_views(session: Session, user: Principal, conversation_id: str) -> dict[str, Any]:
    """The conversation's runs not ended yet, oldest first (the first is the active one): what a
    client that reloads mid-answer re-attaches to."""
    conversation = conversations.load_owned(session, user, conversation_id)
    return {"items": [view(session, run) for run in going(session, conversation.id)]}


def load_owned(session: Session, user: Principal, run_id: str) -> ChatRun:
    run = session.get(ChatRun, run_id)
    conversation = session.get(Conversation, run.conversation_id) if run is not None else None
    if run is None or conversation is None or not user.can_see(conversation.user_id):
        raise not_found(run_id)
    return run


def run_view(session: Session, user: Principal, run_id: str) -> dict[str, Any]:
    return view(session, load_owned(session, user, run_id))


def _end_held(session: Session, user: Principal, run_id: str) -> bool:
    """Cancel a run that has no task yet (under the lock: its turn may just have come);
    False when it has a task, which is then cancelled like any task."""
    run = load_owned(session, user, run_id)
    conversations.lock(session, run.conversation_id)
    session.refresh(run)
    if run.state in RUN_TERMINAL:
        raise ApiProblem(409, "Conflict", f"Run {run_id} already ended ({run.state}).")
    if session.get(Task, run.id) is not None:
        return False
    if not move(run, "cancelled"):
        raise ApiProblem(409, "Conflict", f"Run {run_id} cannot be cancelled ({run.state}).")
    session.add(run)
    return True


async def cancel(db: Database, bus: Bus, user: Principal, run_id: str) -> None:
    if await db.run(_end_held, user, run_id):
        await end_unrun(bus, run_id, f"cancelled by {user.id} before it started")
        return
    await tasks.cancel(db, bus, user, run_id)


def _check_approvable(session: Session, user: Principal, run_id: str) -> None:
    run = load_owned(session, user, run_id)
    if run.state in RUN_TERMINAL or session.get(Task, run.id) is None:
        raise ApiProblem(409, "Conflict", f"Run {run_id} is not waiting for approval ({run.state}).")


async def approve(db: Database, bus: Bus, user: Principal, run_id: str, body: RunApproval) -> str:
    """The plan's (or any approval node's) decision, through the task approval path."""
    await db.run(_check_approvable, user, run_id)
    decision = task_approvals.Approval(decision=body.decision, comment=body.comment, args=body.args)
    return await task_approvals.approve(db, bus, user, run_id, decision)


async def stop_all(db: Database, bus: Bus | None, user: Principal, run_ids: list[str], started: set[str]) -> None:
    """A deleted conversation's runs that were still going: their tasks are cancelled (a task
    still on the work queue is taken off it), and the streams of runs that never got a task are
    ended. Best effort: the records are gone already."""
    if bus is None or not bus.connected:
        return
    for run_id in run_ids:
        try:
            if run_id in started:
                await tasks.cancel(db, bus, user, run_id)
            else:
                await end_unrun(bus, run_id, "its conversation was deleted")
        except Exception as exc:  # it ended meanwhile, or the bus failed: nothing left to stop
            log.info("stopping run %s of a deleted conversation: %s", run_id, exc)
