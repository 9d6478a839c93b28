"""How a chat run follows its task, on the recorder's path (one durable consumer shared by every
gateway replica, so exactly one replica handles each event — but batches can be applied out of
order: on several replicas at once, a failed one again later): the run's state moves with the
latest status in its task's log, through the state machine (`states.move`); when the task ends,
the assistant's message(s) are written and the next held run of the conversation gets its task
and is published. At least once and idempotent: a repeated event finds the run ended and its
successor already holding a task."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlmodel import Session, col, select

from services.gateway.chat import conversations, memory, messages
from services.gateway.chat.answers import RunTrace, error_sentence, read_trace
from services.gateway.chat.runs import next_task
from services.gateway.chat.states import RUN_TERMINAL, move, path, state_for
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.runs import submit as tasks
from services.gateway.tables import Task
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import AnyEvent, DoneEvent, StatusEvent
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.chat")


def _chat_runs(session: Session, ids: list[str]) -> set[str]:
    return set(session.exec(select(ChatRun.id).where(col(ChatRun.id).in_(ids))))


def _advance(session: Session, latest: list[tuple[str, str]]) -> None:
    """Each run to the state its task's latest status (running, waiting) means."""
    for run_id, status in latest:
        run = session.exec(select(ChatRun).where(ChatRun.id == run_id).with_for_update()).one_or_none()
        if run is None:
            continue
        new = state_for(status, run.state, run.mode, run.stop_reason)
        if new is not None and follow(run, new):
            session.add(run)


def follow(run: ChatRun, new: str) -> bool:
    """Move the run to `new`, the state its task is in. The recorder's batches are applied on
    every gateway replica at once, and a failed one again later, so the status events before
    the one that says `new` may not have been applied yet: the moves they skipped are made on the
    way, each one checked by the machine. False when nothing changed (there already, or refused)."""
    steps = path(run.state, new, run.mode)
    if steps is None:
        return move(run, new)  # refused, and logged
    if len(steps) > 1:
        log.info("chat run %s is %s before its moves %s were recorded", run.id, new, " → ".join(steps[:-1]))
    for step in steps:
        move(run, step)
    return bool(steps)


def _finish(session: Session, run_id: str, trace: RunTrace) -> Task | None:
    """End the run with its messages, then hand the turn on; returns the task to publish."""
    run = session.get(ChatRun, run_id)
    if run is None:
        return None  # its conversation was deleted
    conversation = conversations.lock(session, run.conversation_id)
    if conversation is None:
        return None
    session.refresh(run)
    if run.state not in RUN_TERMINAL and end_run(run, trace):
        run.model = trace.model or run.model
        session.add(run)
        if run.stop_reason == "rollback":  # the newer message replaces this turn: none of it stays
            messages.remove_run(session, run.id)
        else:
            write_answer(session, run, trace)
        if run.state == "succeeded":
            keep_summary(session, conversation, session.get(Task, run.id), trace)
    return next_task(session, conversation)


def end_run(run: ChatRun, trace: RunTrace) -> bool:
    """Move the run to the state its task ended with (see `follow`); False when refused."""
    ended = state_for(trace.status or "failed", run.state, run.mode, run.stop_reason) or "failed"
    follow(run, ended)
    return run.state == ended


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
        moved: set[str] = set()
        ended: list[str] = []
        for event in events:
            if isinstance(event, StatusEvent) and event.status not in TERMINAL:
                moved.add(event.task_id)
            elif isinstance(event, DoneEvent) and event.status in TERMINAL and event.task_id not in ended:
                ended.append(event.task_id)
        if not moved and not ended:
            return
        runs = await self.db.run(_chat_runs, sorted(moved | set(ended)))
        if not runs:
            return
        going = sorted(moved & runs)
        if going:
            await self.db.run(_advance, await self.latest_statuses(going))
        for run_id in ended:
            if run_id in runs:
                await self.finish(run_id)

    async def latest_statuses(self, run_ids: list[str]) -> list[tuple[str, str]]:
        """The latest status in each run's log, which the run follows, rather than the statuses
        of this batch: another replica may have applied a later one already (an ending is left
        to the run's `done`)."""
        latest = []
        for run_id in run_ids:
            event = await last_event(self.bus, run_id, "status")
            if isinstance(event, StatusEvent) and event.status not in TERMINAL:
                latest.append((run_id, event.status))
        return latest

    async def finish(self, run_id: str) -> None:
        trace = await read_trace(self.bus, run_id)
        task = await self.db.run(_finish, run_id, trace)
        if task is not None:
            log.info("chat run %s ended; its conversation's next run %s starts", run_id, task.id)
            await tasks.queue_task(self.db, self.bus, task)



