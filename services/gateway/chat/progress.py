"""How a chat run follows its task, on the recorder's path (one durable consumer shared by every
gateway replica, so exactly one replica handles each event): the run's state moves with the
task's status; when the task ends, the assistant's message(s) are written and the next held run
of the conversation gets its task and is published. At least once and idempotent: a repeated
event finds the run ended and its successor already holding a task."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlmodel import Session, col, select

from services.gateway import task_service as tasks
from services.gateway.chat import conversations, memory, messages
from services.gateway.chat.answers import RunTrace, error_sentence, read_trace
from services.gateway.chat.runs import next_task
from services.gateway.chat.states import RUN_TERMINAL, can_move, state_for
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.tables import Task, now
from shared.bus import Bus
from shared.contract.events import AnyEvent, DoneEvent, StatusEvent
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.chat")


def _chat_runs(session: Session, ids: list[str]) -> set[str]:
    return set(session.exec(select(ChatRun.id).where(col(ChatRun.id).in_(ids))))


def _advance(session: Session, moves: list[tuple[str, str]]) -> None:
    """Non-terminal task statuses (running, waiting) → run states, in stream order."""
    for run_id, status in moves:
        run = session.exec(select(ChatRun).where(ChatRun.id == run_id).with_for_update()).one_or_none()
        if run is None:
            continue
        new = state_for(status, run.state, run.mode, run.stop_reason)
        if new is not None and can_move(run.state, new):
            run.state = new
            session.add(run)


def _finish(session: Session, run_id: str, trace: RunTrace) -> Task | None:
    """End the run with its messages, then hand the turn on; returns the task to publish."""
    run = session.get(ChatRun, run_id)
    if run is None:
        return None  # its conversation was deleted
    conversation = conversations.lock(session, run.conversation_id)
    if conversation is None:
        return None
    session.refresh(run)
    if run.state not in RUN_TERMINAL:
        ended = state_for(trace.status or "failed", run.state, run.mode, run.stop_reason) or "failed"
        run.state, run.ended_at = ended, now()
        run.model = trace.model or run.model
        session.add(run)
        if run.stop_reason == "rollback":  # the newer message replaces this turn: none of it stays
            messages.remove_run(session, run.id)
        else:
            write_answer(session, run, trace)
        if run.state == "succeeded":
            keep_summary(session, conversation, session.get(Task, run.id), trace)
    return next_task(session, conversation)


def keep_summary(session: Session, conversation: Conversation, task: Task | None, trace: RunTrace) -> None:
    """Store the running summary the run folded, unless a later one is stored already."""
    made = memory.made_summary(task.input if task else None, trace.output)
    if made is not None and made[1] > conversation.summarized:
        conversation.summary, conversation.summarized = made
        session.add(conversation)


def write_answer(session: Session, run: ChatRun, trace: RunTrace) -> None:
    """The assistant's side of the turn: the answer; or what was shown of it (`interrupted`,
    with the tool steps so far) and, for a failure, an `error` message saying why."""
    fields = {"tool_events": trace.tool_events, "thinking": trace.thinking_text, "usage": trace.usage,
              "model": trace.model}
    if run.state == "succeeded":
        messages.add(session, run.conversation_id, run.id, run.seq, "assistant", trace.answer, **fields)
        return
    if trace.partial or trace.tool_events:
        messages.add(session, run.conversation_id, run.id, run.seq, "assistant", trace.partial,
                     message_type="interrupted", **fields)
    if run.state in ("failed", "budget_exceeded"):
        messages.add(session, run.conversation_id, run.id, run.seq, "assistant",
                     error_sentence(trace.status, trace.code, trace.error), message_type="error", model=trace.model)


class ChatProgress:
    """The recorder's hook for chat runs (`Recorder(after=…)`)."""

    def __init__(self, bus: Bus, db: Database) -> None:
        self.bus = bus
        self.db = db

    async def __call__(self, events: Sequence[AnyEvent]) -> None:
        moves: list[tuple[str, str]] = []
        ended: list[str] = []
        for event in events:
            if isinstance(event, StatusEvent) and event.status not in TERMINAL:
                moves.append((event.task_id, event.status))
            elif isinstance(event, DoneEvent) and event.status in TERMINAL and event.task_id not in ended:
                ended.append(event.task_id)
        if not moves and not ended:
            return
        runs = await self.db.run(_chat_runs, sorted({t for t, _ in moves} | set(ended)))
        if not runs:
            return
        moves = [(t, s) for t, s in moves if t in runs]
        if moves:
            await self.db.run(_advance, moves)
        for run_id in ended:
            if run_id in runs:
                await self.finish(run_id)

    async def finish(self, run_id: str) -> None:
        trace = await read_trace(self.bus, run_id)
        task = await self.db.run(_finish, run_id, trace)
        if task is not None:
            log.info("chat run %s ended; its conversation's next run %s starts", run_id, task.id)
            await tasks.queue_task(self.db, self.bus, task)



