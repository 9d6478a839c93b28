"""The conversation queue: admits a conversation's runs, holds them in order, and advances them.

Per conversation the runs execute one at a time, in order. The active run is the oldest one not
ended; only it has a task. Which run is active — and so whether a new run is published now or
held — is decided under the conversation's row lock (`conversations.lock`), so several gateway
replicas agree.

- **Admit** (`post_message`): the user message and the run (and, for the active run, its task
  row) are committed before anything is queued; a task row the bus did not get is re-published
  by the requeuer like any task. A run that must wait is announced (`queued` event).
- **Advance** (`ConversationQueue`): a durable consumer of the runs' status channel (one shared by
  every gateway replica, so exactly one replica handles each event — though batches can be
  applied out of order: on several replicas at once, a failed one again later). A run follows its
  task's latest status through the state machine (`states.follow`); on the task's `done` — the
  run-ended event, with the run's result — the run ends with the assistant's message(s) (the
  transcript read from its log: `answers.read_trace`) and the next held run of the conversation
  gets its task and is published. At least once and idempotent: a repeated event finds the run
  ended and its successor already holding a task. Each change is announced once committed
  (`runs.recorded`), for the readers that wait for it.

Nothing else writes a run's state: readers of a run (its streams, `/lg`, `/v1`) only wait."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from anyio import from_thread
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway.access import users
from services.gateway.access.principal import Principal
from services.gateway.chat import conversations, lineage, memory, messages
from services.gateway.chat.answers import RunTrace, keep_summary, read_trace, write_answer
from services.gateway.chat.modes import Mode, graph_for
from services.gateway.chat.states import RUN_TERMINAL, follow, move, state_for
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.dsl import check_dsl
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.runs import submit as tasks
from services.gateway.runs.consumer import EventConsumer
from services.gateway.runs.recorded import announce
from services.gateway.runs.submit import BeforeQueue
from services.gateway.tables import Task
from services.gateway.triggers import deliveries
from shared.bus import Bus
from shared.bus.events import EventPublisher, last_event, last_event_n
from shared.contract.events import AnyEvent, DoneEvent, QueuedEvent, StatusEvent, finish_task
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.chat")
MAX_TEXT = 100_000
# The policies that stop the active run: `rollback` also removes its turn (see `_finish`).
STOPPING = ("interrupt", "rollback")


class PostMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TEXT)
    mode: Mode | None = None
    model: str | None = Field(default=None, min_length=1, max_length=200)
    multitask: Literal["enqueue", "reject", "interrupt", "rollback"] = "enqueue"
    # Where the run's end is POSTed (a completion callback); checked (SSRF) by the route that takes it.
    webhook: str | None = Field(default=None, min_length=1, max_length=2000)


@dataclass
class Accepted:
    """What `_accept` committed and what is left to do on the bus."""

    message: dict[str, Any]
    run: dict[str, Any]
    task: Task | None = None  # the new run's task, when it is active at once
    interrupt: str | None = None  # the active run a message interrupts
    dropped: list[str] = field(default_factory=list)  # held runs an interruption ended unrun


def going(session: Session, conversation_id: str) -> list[ChatRun]:
    """The runs not ended yet, oldest first: the first one is the active run."""
    return list(session.exec(select(ChatRun)
                             .where(ChatRun.conversation_id == conversation_id,
                                    col(ChatRun.state).not_in(RUN_TERMINAL))
                             .order_by(col(ChatRun.seq))))


def make_task(session: Session, conversation: Conversation, run: ChatRun) -> Task:
    """The run's task: its mode's graph, the user's text and its memory as it is now (the
    answers of every earlier run included, since they ended before this one's turn)."""
    asked = next((m for m in messages.of_run(session, run.id) if m.role == "user"), None)
    # Model precedence: the message's, else the conversation's (both kept on the run), else the
    # user's default, else (none named) the failover chain.
    run.model = run.model or users.default_model(session, conversation.user_id)
    session.add(run)
    branch = lineage.before(session, conversation.id, run)
    said = messages.said(session, conversation.id, run.seq, branch)
    # The stored summary covers the first turns of the unbranched conversation: a branch folds its own.
    remembered = (memory.plan(said, conversation.summary, conversation.summarized) if branch is None
                  else memory.plan(said, None, 0))
    dsl = graph_for(run.mode, fold=remembered.folds, kb=conversation.kb is not None)
    check_dsl(dsl)  # built here, but checked as a submitted one is: the dispatcher does not check again
    task = Task(
        id=run.id,
        user_id=conversation.user_id,
        dsl=dsl,
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


# ---- admit ---------------------------------------------------------------------------------------

Announce = Callable[[str, int], None]


def branch_point(session: Session, conversation_id: str, follows: str | None) -> tuple[int, str | None]:
    """The seq of the conversation's next run and what it `follows` (None: the latest run;
    `lineage.START`: no run, a branch from the start). A run that goes on from an older one starts
    a branch: only once no run is going (the branch would otherwise not be the one the going runs
    go on)."""
    last = session.exec(select(ChatRun).where(ChatRun.conversation_id == conversation_id)
                        .order_by(col(ChatRun.seq).desc()).limit(1)).first()
    if follows is None or (last is not None and follows == last.id) or (last is None and follows == lineage.START):
        return (last.seq if last is not None else 0) + 1, None
    known = select(ChatRun.id).where(ChatRun.id == follows, ChatRun.conversation_id == conversation_id)
    if follows != lineage.START and session.exec(known).first() is None:
        raise ApiProblem(404, "Not Found", f"Conversation {conversation_id} has no run {follows}.")
    ahead = going(session, conversation_id)
    if ahead:
        raise ApiProblem(409, "Conflict", f"Run {ahead[0].id} of this conversation is still going: a branch "
                                          "from an earlier run starts once it has ended.")
    assert last is not None  # the followed run is one of the conversation's
    return last.seq + 1, follows


def _accept(session: Session, user: Principal, conversation_id: str, body: PostMessage, grey: list[str],
            announce_queued: Announce, follows: str | None = None, callback_kind: str = "chat",
            client_id: str | None = None) -> Accepted:
    """Under the conversation's lock: the user message and the run, and the run's task when it
    is the active one. A run that must wait is announced (`queued` event) before the lock is
    released: its turn may come as soon as the lock is, and `queued` must precede its `running`.
    `follows`: the earlier run this one goes on from (a branch), not the latest."""
    conversation = conversations.lock_owned(session, user, conversation_id)
    ahead = going(session, conversation.id)
    if ahead and body.multitask == "reject":
        raise ApiProblem(409, "Conflict", f"Run {ahead[0].id} of this conversation is still going "
                                          "(send with multitask=enqueue or interrupt).")
    seq, follows = branch_point(session, conversation.id, follows)
    run = ChatRun(id=new_id("t"), conversation_id=conversation.id, seq=seq, mode=body.mode or conversation.mode,
                  model=body.model or conversation.model, multitask=body.multitask, guardrail_grey=grey,
                  follows=follows)
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
    if body.webhook is not None:
        deliveries.owe(session, run.id, conversation.user_id, body.webhook, callback_kind)
    message = messages.add(session, conversation.id, run.id, seq, "user", body.text, client_id=client_id)
    session.flush()
    if not ahead:
        accepted.task = make_task(session, conversation, run)
        session.flush()
    else:
        announce_queued(run.id, run.position)
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


def require_bus(bus: Bus | None) -> Bus:
    if bus is None or not bus.connected:
        raise ApiProblem(503, "Service Unavailable", "The message bus is not connected.")
    return bus


async def post_message(db: Database, bus: Bus | None, user: Principal, conversation_id: str, body: PostMessage,
                       grey: list[str], before_queue: BeforeQueue | None = None,
                       follows: str | None = None, callback_kind: str = "chat",
                       client_id: str | None = None) -> dict[str, Any]:
    """`before_queue` runs before a run that is active at once is published (a run held behind
    others is published by the queue later, without it): e.g. to start reading its events.
    `follows`: the earlier run the new one goes on from, when it starts a branch.
    `callback_kind`: the shape of the run's completion callback (`body.webhook`): `chat` or `lg`.
    `client_id`: the id a LangGraph client gave the message (`ChatMessage.client_id`)."""
    if body.multitask in STOPPING:
        require_bus(bus)  # the interruption is a cancel on the bus: refuse before writing anything

    def announce_queued(run_id: str, position: int) -> None:  # runs in the database's worker thread
        if bus is None or not bus.connected:
            return  # its stream simply starts with `running` when its turn comes
        try:
            from_thread.run(emit_queued, bus, run_id, position)
        except Exception as exc:
            log.warning("no queued event for run %s: %s", run_id, exc)

    accepted = await db.run(_accept, user, conversation_id, body, grey, announce_queued, follows, callback_kind,
                            client_id)
    run_id = accepted.run["id"]
    if bus is not None and bus.connected:
        for dropped in accepted.dropped:
            await end_unrun(bus, dropped, f"dropped: run {run_id} interrupted the conversation")
    if accepted.task is not None:
        if before_queue is not None:
            await before_queue(accepted.task)
        await tasks.queue_task(db, bus, accepted.task)
    if accepted.interrupt is not None:
        try:
            await tasks.cancel(db, require_bus(bus), user, accepted.interrupt)
        except ApiProblem as exc:  # it ended meanwhile: the queue starts this run anyway
            if exc.status != 409:
                raise
    return {"message": accepted.message, "run": accepted.run, "interrupted": accepted.interrupt}


# ---- advance -------------------------------------------------------------------------------------


GOING_KEPT = 10_000  # chat runs remembered as going (see `ConversationQueue._going`)


def _chat_runs(session: Session, ids: list[str]) -> set[str]:
    return set(session.exec(select(ChatRun.id).where(col(ChatRun.id).in_(ids))))


class RunEnds(Protocol):
    """Told of a run's end, or of its stop at an approval (the completion callbacks:
    triggers/run_callbacks.py): `fix` in the transaction that records it, `queue` once committed
    (again when a redelivered event finds the run ended already: both are idempotent)."""

    def fix(self, session: Session, run: ChatRun, trace: RunTrace | None) -> None: ...

    async def queue(self, run_ids: list[str]) -> None: ...


def _advance(session: Session, latest: list[tuple[str, str]], ends: RunEnds | None = None) -> list[str]:
    """Each run to the state its task's latest status (running, waiting) means; the runs moved."""
    moved: list[str] = []
    for run_id, status in latest:
        run = session.exec(select(ChatRun).where(ChatRun.id == run_id).with_for_update()).one_or_none()
        if run is None:
            continue
        new = state_for(status, run.state, run.mode, run.stop_reason)
        if new is not None and follow(run, new):
            session.add(run)
            moved.append(run_id)
            if ends is not None:
                ends.fix(session, run, None)
    return moved


def _finish(session: Session, run_id: str, trace: RunTrace, ends: RunEnds | None = None) -> Task | None:
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
            if lineage.before(session, conversation.id, run) is None:  # a branch's summary is its own
                keep_summary(session, conversation, session.get(Task, run.id), trace)
    if ends is not None and run.state in RUN_TERMINAL:  # also when an earlier pass (or a cancel) ended it
        session.flush()
        ends.fix(session, run, trace)
    return next_task(session, conversation)


def end_run(run: ChatRun, trace: RunTrace) -> bool:
    """Move the run to the state its task ended with (see `follow`); False when refused."""
    ended = state_for(trace.status or "failed", run.state, run.mode, run.stop_reason) or "failed"
    follow(run, ended)
    return run.state == ended


class ConversationQueue:
    """Advances the conversations' runs from their tasks' status channel (see the module
    docstring): a pull consumer of its own, apart from the task recorder's."""

    def __init__(self, bus: Bus, db: Database, batch: int = 200, ends: RunEnds | None = None) -> None:
        self.bus = bus
        self.db = db
        self.ends = ends
        # The chat runs this replica has seen going (from their `running`), until their `done`:
        # a `done` of one of them is handled without asking the database whether it is a chat
        # run first (it ends the run sooner, and with it the streams that wait for its record).
        # Bounded; a run missing here (its `running` went to another replica) is looked up.
        self._going: OrderedDict[str, None] = OrderedDict()
        self._consumer = EventConsumer(bus, bus.names.chat_consumer, self.advance, name="conversation queue",
                                       batch=batch)

    async def start(self) -> None:
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()

    async def advance(self, events: Sequence[AnyEvent]) -> None:
        moved: set[str] = set()
        ended: list[str] = []
        for event in events:
            if isinstance(event, StatusEvent) and event.status not in TERMINAL:
                moved.add(event.task_id)
            elif isinstance(event, DoneEvent) and event.status in TERMINAL and event.task_id not in ended:
                ended.append(event.task_id)
        if not moved and not ended:
            return
        touched = moved | set(ended)
        unknown = sorted(touched - self._going.keys())
        runs = (touched & self._going.keys()) | (await self.db.run(_chat_runs, unknown) if unknown else set())
        for run_id in sorted(moved & runs):
            self._going[run_id] = None
        while len(self._going) > GOING_KEPT:
            self._going.popitem(last=False)
        if not runs:
            return
        going_now = sorted(moved & runs)
        if going_now:
            changed = await self.db.run(_advance, await self._latest_statuses(going_now), self.ends)
            await announce(self.bus, changed)
            if self.ends is not None and changed:
                await self.ends.queue(changed)
        for run_id in ended:
            if run_id in runs:
                await self._finish(run_id)
            self._going.pop(run_id, None)

    async def _latest_statuses(self, run_ids: list[str]) -> list[tuple[str, str]]:
        """The latest status in each run's log, which the run follows, rather than the statuses
        of this batch: another replica may have applied a later one already (an ending is left
        to the run's `done`)."""
        latest = []
        for run_id in run_ids:
            event = await last_event(self.bus, run_id, "status")
            if isinstance(event, StatusEvent) and event.status not in TERMINAL:
                latest.append((run_id, event.status))
        return latest

    async def _finish(self, run_id: str) -> None:
        trace = await read_trace(self.bus, run_id)
        task = await self.db.run(_finish, run_id, trace, self.ends)
        await announce(self.bus, [run_id])
        if self.ends is not None:
            await self.ends.queue([run_id])
        if task is not None:
            log.info("chat run %s ended; its conversation's next run %s starts", run_id, task.id)
            await tasks.queue_task(self.db, self.bus, task)
