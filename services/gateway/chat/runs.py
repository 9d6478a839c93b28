"""Chat runs: a posted message becomes a run, and a run becomes a task when its turn comes.

Per conversation the runs execute one at a time, in order. The active run is the oldest one not
ended; only it has a task. Which run is active — and so whether a new run is published now or
held — is decided under the conversation's row lock (`conversations.lock`), so several gateway
replicas agree. The user message and the run (and, for the active run, its task row) are
committed before anything is queued; a task row the bus did not get is re-published by the
requeuer like any task."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from anyio import from_thread
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway import users
from services.gateway.chat import conversations, memory, messages
from services.gateway.chat.modes import Mode, graph_for
from services.gateway.chat.states import RUN_TERMINAL, move
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.ids import new_id
from services.gateway.principal import Principal
from services.gateway.problems import ApiProblem
from services.gateway.runs import approvals as task_approvals
from services.gateway.runs import submit as tasks
from services.gateway.tables import Task, aware
from shared.bus import Bus
from shared.bus.events import EventPublisher, last_event_n
from shared.contract.events import QueuedEvent, finish_task

log = logging.getLogger("agentix.gateway.chat")
MAX_TEXT = 100_000
# The policies that stop the active run: `rollback` also removes its turn (see progress.py).
STOPPING = ("interrupt", "rollback")


class PostMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    mode: Mode | None = None
    model: str | None = Field(default=None, min_length=1, max_length=200)
    multitask: Literal["enqueue", "reject", "interrupt", "rollback"] = "enqueue"


class RunApproval(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "reject"]
    comment: str | None = Field(default=None, max_length=4000)


@dataclass
class Accepted:
    """What `_accept` committed and what is left to do on the bus."""

    message: dict[str, Any]
    run: dict[str, Any]
    task: Task | None = None  # the new run's task, when it is active at once
    interrupt: str | None = None  # the active run a message interrupts
    dropped: list[str] = field(default_factory=list)  # held runs an interruption ended unrun


def not_found(run_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No run {run_id!r}.")


def going(session: Session, conversation_id: str) -> list[ChatRun]:
    """The runs not ended yet, oldest first: the first one is the active run."""
    return list(session.exec(select(ChatRun)
                             .where(ChatRun.conversation_id == conversation_id,
                                    col(ChatRun.state).not_in(RUN_TERMINAL))
                             .order_by(col(ChatRun.seq))))


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


def make_task(session: Session, conversation: Conversation, run: ChatRun) -> Task:
    """The run's task: its mode's graph, the user's text and its memory as it is now (the
    answers of every earlier run included, since they ended before this one's turn)."""
    asked = next((m for m in messages.of_run(session, run.id) if m.role == "user"), None)
    # Model precedence: the message's, else the conversation's (both kept on the run), else the
    # user's default, else (none named) the failover chain.
    run.model = run.model or users.default_model(session, conversation.user_id)
    session.add(run)
    remembered = memory.plan(messages.said(session, conversation.id, run.seq), conversation.summary,
                             conversation.summarized)
    task = Task(
        id=run.id,
        user_id=conversation.user_id,
        dsl=graph_for(run.mode, fold=remembered.folds, kb=conversation.kb is not None),
        input={"text": asked.content if asked else "", **remembered.task_input(),
               **({"kb": conversation.kb} if conversation.kb else {})},
        options={"model": run.model} if run.model else {},
        guardrail_grey=list(run.guardrail_grey or []),
        session_id=conversation.id,
    )
    session.add(task)
    return task


def next_task(session: Session, conversation: Conversation) -> Task | None:
    """Under the conversation's lock: the task of the run whose turn it now is, created when
    that run is still held (None when the active run already has its task, or none waits)."""
    runs = going(session, conversation.id)
    if not runs or session.get(Task, runs[0].id) is not None:
        return None
    return make_task(session, conversation, runs[0])


Announce = Callable[[str, int], None]


def _accept(session: Session, user: Principal, conversation_id: str, body: PostMessage, grey: list[str],
            announce: Announce) -> Accepted:
    """Under the conversation's lock: the user message and the run, and the run's task when it
    is the active one. A run that must wait is announced (`queued` event) before the lock is
    released: its turn may come as soon as the lock is, and `queued` must precede its `running`."""
    conversation = conversations.lock_owned(session, user, conversation_id)
    ahead = going(session, conversation.id)
    if ahead and body.multitask == "reject":
        raise ApiProblem(409, "Conflict", f"Run {ahead[0].id} of this conversation is still going "
                                          "(send with multitask=enqueue or interrupt).")
    last = session.exec(select(ChatRun.seq).where(ChatRun.conversation_id == conversation.id)
                        .order_by(col(ChatRun.seq).desc()).limit(1)).first()
    seq = (last or 0) + 1
    run = ChatRun(id=new_id("t"), conversation_id=conversation.id, seq=seq, mode=body.mode or conversation.mode,
                  model=body.model or conversation.model, multitask=body.multitask, guardrail_grey=grey)
    accepted = Accepted(message={}, run={})
    if ahead and body.multitask in STOPPING:
        active, held = ahead[0], ahead[1:]
        active.stop_reason = body.multitask
        session.add(active)
        accepted.interrupt = active.id
        for dropped in held:  # never started: they end here, cancelled by the newer message
            if move(dropped, "cancelled"):
                session.add(dropped)
                accepted.dropped.append(dropped.id)
        ahead = [active]
    run.position = len(ahead)
    session.add(run)
    message = messages.add(session, conversation.id, run.id, seq, "user", body.text)
    session.flush()
    if not ahead:
        accepted.task = make_task(session, conversation, run)
        session.flush()
    else:
        announce(run.id, run.position)
    accepted.message = messages.view(message)
    accepted.run = {"id": run.id, "state": run.state, "position": run.position}
    return accepted


async def end_unrun(bus: Bus, run_id: str, reason: str) -> None:
    """End the event log of a run that never got a task, so its stream readers see it end."""
    publisher = EventPublisher(bus, run_id, start_n=await last_event_n(bus, run_id))
    await finish_task(publisher, run_id, "cancelled", error=reason, code="cancelled")


async def emit_queued(bus: Bus, run_id: str, position: int) -> None:
    publisher = EventPublisher(bus, run_id)
    await publisher.emit(QueuedEvent(task_id=run_id, position=position))
    await publisher.flush()


def _require_bus(bus: Bus | None) -> Bus:
    if bus is None or not bus.connected:
        raise ApiProblem(503, "Service Unavailable", "The message bus is not connected.")
    return bus


async def post_message(db: Database, bus: Bus | None, user: Principal, conversation_id: str, body: PostMessage,
                       grey: list[str]) -> dict[str, Any]:
    if body.multitask in STOPPING:
        _require_bus(bus)  # the interruption is a cancel on the bus: refuse before writing anything

    def announce(run_id: str, position: int) -> None:  # runs in the database's worker thread
        if bus is None or not bus.connected:
            return  # its stream simply starts with `running` when its turn comes
        try:
            from_thread.run(emit_queued, bus, run_id, position)
        except Exception as exc:
            log.warning("no queued event for run %s: %s", run_id, exc)

    accepted = await db.run(_accept, user, conversation_id, body, grey, announce)
    run_id = accepted.run["id"]
    if bus is not None and bus.connected:
        for dropped in accepted.dropped:
            await end_unrun(bus, dropped, f"dropped: run {run_id} interrupted the conversation")
    if accepted.task is not None:
        await tasks.queue_task(db, bus, accepted.task)
    if accepted.interrupt is not None:
        try:
            await tasks.cancel(db, _require_bus(bus), user, accepted.interrupt)
        except ApiProblem as exc:  # it ended meanwhile: the recorder starts this run anyway
            if exc.status != 409:
                raise
    return {"message": accepted.message, "run": accepted.run, "interrupted": accepted.interrupt}


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
    decision = task_approvals.Approval(decision=body.decision, comment=body.comment)
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
