"""LangGraph runs are chat runs: a run's input adds its last human message to the thread (a
conversation) under the asked `multitask_strategy`; `command.resume` answers the approval the
thread waits for (the run that waited goes on: same run id); `command.update`/`goto` add
messages first, or instead of a model call (command.py); statuses map as in docs/API.md."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat import conversations, lineage
from services.gateway.chat import queue as chat_queue
from services.gateway.chat import runs as chat_runs
from services.gateway.chat.modes import Mode
from services.gateway.chat.tables import ChatMessage, ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import assistants, checkpoints, command, messages, state_update, threads
from services.gateway.protocols.langgraph.refusals import refused
from services.gateway.protocols.langgraph.resume import decision_of
from services.gateway.protocols.langgraph.run_request import RunCreate
from services.gateway.protocols.langgraph.settled import settled
from services.gateway.protocols.langgraph.state_update import Said
from services.gateway.protocols.langgraph.stream import LgFrames, RunStream, modes_of
from services.gateway.runs.stream import run_frames
from services.gateway.runs.submit import BeforeQueue
from services.gateway.tables import Task, aware
from services.gateway.triggers import deliveries
from shared.aio import spawn
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import ApprovalRequestEvent

log = logging.getLogger("agentix.gateway.langgraph")
RunStatus = Literal["pending", "running", "error", "success", "timeout", "interrupted"]
RunField = Literal["run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status", "metadata",
                   "multitask_strategy", "kwargs"]
# A chat run's state → the LangGraph run status (a failed run whose task timed out: `timeout`).
STATUS: Final[dict[str, RunStatus]] = {
    "queued": "pending", "planning": "running", "running": "running", "awaiting_approval": "interrupted",
    "succeeded": "success", "failed": "error", "budget_exceeded": "error", "cancelled": "interrupted",
    "interrupted": "interrupted",
}
JOIN_MODES: Final = ("values", "updates", "messages-tuple", "custom")  # a join without stream_mode: all


@dataclass
class Started:
    """A run the thread now has (new, or resumed from its approval)."""

    run: ChatRun
    stream: RunStream
    opening_at: int = 0  # the stream of a resumed run starts after its approval request


def view(session: Session, run: ChatRun) -> dict[str, Any]:
    status = STATUS.get(run.state, "running")
    if run.state == "failed":
        task = session.get(Task, run.id)
        status = "timeout" if task is not None and task.status == "timeout" else status
    return {"run_id": run.id, "thread_id": run.conversation_id, "assistant_id": assistants.chat_id(run.mode),
            "created_at": aware(run.created_at), "updated_at": aware(run.ended_at or run.created_at),
            "status": status, "metadata": {"mode": run.mode, "model": run.model, **(run.meta or {})},
            "multitask_strategy": run.multitask, "kwargs": {}}


def load(session: Session, user: Principal, thread_id: str, run_id: str) -> ChatRun:
    run = chat_runs.load_owned(session, user, run_id)
    if run.conversation_id != thread_id:
        raise chat_runs.not_found(run_id)
    return run


def get(session: Session, user: Principal, thread_id: str, run_id: str) -> dict[str, Any]:
    return view(session, load(session, user, thread_id, run_id))


def list_runs(session: Session, user: Principal, thread_id: str, limit: int, offset: int,
              status: RunStatus | None = None, fields: list[RunField] | None = None) -> list[dict[str, Any]]:
    """The thread's runs, newest first: those with `status`, if given, each with `fields` only, if given."""
    threads.load(session, user, thread_id)
    query = select(ChatRun).where(ChatRun.conversation_id == thread_id).order_by(col(ChatRun.seq).desc())
    if status is None:
        views = [view(session, r) for r in session.exec(query.offset(offset).limit(limit))]
    else:  # a failed run is `error` or `timeout` by its task: filtered on the view, then paged
        states = [state for state, shown in STATUS.items()
                  if shown == status or (status, state) == ("timeout", "failed")]
        views = [v for v in (view(session, r) for r in session.exec(query.where(col(ChatRun.state).in_(states))))
                 if v["status"] == status][offset:offset + limit]
    return [{k: v[k] for k in fields} for v in views] if fields else views


def question(body: RunCreate, update: list[Said]) -> command.Asked:
    """What a run with an input asks: the input's last message, a human one (or a string
    `input.text`); its messages before that, after `update` (`command.update`'s), are said first,
    as the update's are: a turn of their own, so the model reads them as the conversation so far."""
    given = body.input or {}
    for key in given:
        if key not in ("messages", "text") or (key == "text" and "messages" in given):
            raise refused(f"input.{key}", "the chat agent's input is `{messages}` (or a string `{text}`)")
    said = given.get("messages")
    if said:
        before = state_update.said_of({"messages": said}, "input")
        role, text, message_id = before.pop()
        if role != "user" or not text.strip():
            raise refused("input.messages", "the last message is the run's question: a human one, with text")
        updated = command.from_field(update, "command.update.messages")
        inputs = command.from_field([*before, (role, text, message_id)], "input.messages")
        if updated.keys() & inputs.keys():
            raise refused("input.messages", "two messages have one `id` (one in `input`, one in `command.update`)")
        return command.Asked(text, message_id, [*update, *before], updated | inputs)
    plain = given.get("text")
    if isinstance(plain, str) and plain.strip():
        return command.Asked(plain, None, update, command.from_field(update, "command.update.messages"))
    raise ApiProblem(422, "Invalid request", "The input needs a human message: {\"messages\": [{\"role\": \"user\", "
                                             "\"content\": \"…\"}]}.")


def asked_by(body: RunCreate, asked: command.Command) -> command.Asked:
    """What a run (not a resume, not `goto: __end__`) asks: the input's last message, after the
    update and the input's earlier messages; with no input, the update's last one."""
    return asked.question(body) or question(body, asked.said or [])


def _model(body: RunCreate) -> str | None:
    for source in ((body.config or {}).get("configurable") or {}, body.context or {}):
        model = source.get("model")
        if isinstance(model, str) and model:
            return model
    return None


def _ensure_thread(session: Session, user: Principal, thread_id: str, body: RunCreate) -> None:
    if session.get(Conversation, thread_id) is not None:
        conversation = threads.load(session, user, thread_id)
    elif body.if_not_exists == "create":
        conversation, _ = threads.create(session, user, threads.NewThread(thread_id=thread_id))
    else:
        raise threads.not_found(thread_id)
    threads.mark_run(session, conversation, body.assistant_id, assistants.CHAT_GRAPH)


def _runnable_on(session: Session, user: Principal, thread_id: str, body: RunCreate,
                 asks: command.Asked) -> tuple[Mode, str | None, list[Said]]:
    """The assistant's chat mode and model, the thread it runs on, and what is said before the
    question that the thread does not have yet (`state_update.new_said`), in one transaction. The
    question itself must be new to the thread."""
    mode, model = assistants.runnable(session, user, body.assistant_id)
    _ensure_thread(session, user, thread_id, body)
    said = state_update.new_said(session, thread_id, [*asks.before, ("user", asks.text, asks.client_id)],
                                 asks.field_of, body.follows())
    if asks.client_id is not None and (not said or said[-1][2] != asks.client_id):
        raise refused(asks.field_of(asks.client_id), "the question is a message the thread has: ask it anew, "
                                                     "without its id")
    return mode, model, said[:-1]


def _stream_of(session: Session, run: ChatRun, modes: frozenset[str]) -> RunStream:
    points, parents = checkpoints.of_thread(session, run.conversation_id)
    if not checkpoints.asks(run):  # a turn that ran nothing: it starts with all it added
        before = threads.history(session, run.conversation_id, before_seq=run.seq + 1,
                                 runs=lineage.branch_of(parents, run.id))
    else:
        before = checkpoints.asked_state(session, run, parents)
    own = next(p for p in points if p.id == run.id)
    asked = next((p for p in points if p.question and p.id == own.parent and p.run is run), None)
    return RunStream(run.id, run.conversation_id, before, modes, parent=own.parent, step=own.step,
                     asked_from=asked.parent if asked is not None else None)


def stream_for(session: Session, user: Principal, thread_id: str, run_id: str, stream_mode: Any) -> RunStream:
    return _stream_of(session, load(session, user, thread_id, run_id), modes_of(stream_mode))


def joined(session: Session, user: Principal, thread_id: str, run_id: str, stream_mode: Any) -> Started:
    """An existing run, to follow from its start."""
    run = load(session, user, thread_id, run_id)
    return Started(run, _stream_of(session, run, modes_of(stream_mode)))


Guard = Callable[[str], Awaitable[list[str]]]  # a question → its grey guardrail rules (raises when blocked)


async def start(db: Database, bus: Bus | None, user: Principal, thread_id: str, body: RunCreate,
                guard: Guard, before_queue: BeforeQueue | None = None) -> Started:
    """The thread's new run (or the one its `command.resume` answers); `before_queue` runs before
    a new run is published, when it is at once."""
    modes = modes_of(body.stream_mode)
    asked = command.read(body)
    if asked.resume:
        if body.follows() is not None:
            raise ApiProblem(422, "Invalid request", "`checkpoint` is not supported with `command.resume`: a resume "
                                                     "answers the approval the thread waits for now.",
                             errors=[{"code": "unsupported", "field": "checkpoint", "message": "with command.resume"}])
        return await _resume(db, bus, user, thread_id, asked.answer, modes, body.webhook)
    again = checkpoints.question_run(body.follows())
    if again is not None:
        return await _answer_again(db, bus, user, thread_id, body, asked, again, guard, before_queue)
    if asked.end:
        mode, _ = await db.run(assistants.runnable, user, body.assistant_id)
        return await _ended(db, bus, user, thread_id, body, asked, mode, modes)
    asks = asked_by(body, asked)
    grey = await guard(asks.text)
    mode, assistant_model, before = await db.run(_runnable_on, user, thread_id, body, asks)
    follows = body.follows()
    if before:  # a turn of their own before the question (as update_state adds messages)
        follows = await db.run(command.add_update, user, thread_id, before, follows)
    posted = chat_queue.PostMessage(text=asks.text, mode=mode, model=_model(body) or assistant_model,
                                    multitask=body.multitask_strategy, webhook=body.webhook)
    try:
        accepted = await chat_queue.post_message(db, bus, user, thread_id, posted, grey, before_queue, follows,
                                                 callback_kind="lg", client_id=asks.client_id)
    except ApiProblem as exc:
        if before and follows is not None:  # the run was refused: its added turn goes with it
            await db.run(remove_run, user, thread_id, follows)
        if exc.status == 404 and body.follows() is not None:
            raise checkpoints.not_found(thread_id, body.follows() or "") from exc
        raise

    def opened(session: Session) -> Started:
        run = chat_runs.load_owned(session, user, accepted["run"]["id"])
        if meta := body.run_metadata():
            run.meta = meta
            session.add(run)
        return Started(run, _stream_of(session, run, modes))

    return await db.run(opened)


async def _answer_again(db: Database, bus: Bus | None, user: Principal, thread_id: str, body: RunCreate,
                        asked: command.Command, again: str, guard: Guard, before_queue: BeforeQueue | None) -> Started:
    """A run from a question's checkpoint: that question answered again, on a branch beside the
    first answer (a LangGraph UI's regenerate). Its question is a copy of the first, with its id."""
    if body.input:
        raise refused("input", "a run from a question's checkpoint answers that question again, so it takes no "
                               "input (to ask something else, run from the checkpoint before the question)")
    if asked.said is not None or asked.end:
        raise refused("command", "a run from a question's checkpoint answers that question again: no `update` or "
                                 "`goto`")

    def question(session: Session) -> tuple[Mode, str | None, ChatMessage, str]:
        mode, model = assistants.runnable(session, user, body.assistant_id)
        _ensure_thread(session, user, thread_id, body)
        first = session.get(ChatRun, again)
        said = session.exec(select(ChatMessage).where(ChatMessage.run_id == again, ChatMessage.role == "user")
                            .order_by(col(ChatMessage.id))).first()
        if first is None or first.conversation_id != thread_id or said is None or not checkpoints.asks(first):
            raise checkpoints.not_found(thread_id, checkpoints.question_id(again))
        follows = lineage.links(session, thread_id)[1].get(again) or lineage.START
        return mode, model, said, follows

    mode, assistant_model, said, follows = await db.run(question)
    grey = await guard(said.content)
    posted = chat_queue.PostMessage(text=said.content, mode=mode, model=_model(body) or assistant_model,
                                    multitask=body.multitask_strategy, webhook=body.webhook)
    accepted = await chat_queue.post_message(db, bus, user, thread_id, posted, grey, before_queue, follows,
                                             callback_kind="lg", client_id=messages.from_row(said)["id"])

    def opened(session: Session) -> Started:
        run = chat_runs.load_owned(session, user, accepted["run"]["id"])
        run.answers_again = again
        run.meta = body.run_metadata()
        session.add(run)
        return Started(run, _stream_of(session, run, modes_of(body.stream_mode)))

    return await db.run(opened)


async def _ended(db: Database, bus: Bus | None, user: Principal, thread_id: str, body: RunCreate,
                 asked: command.Command, mode: str, modes: frozenset[str]) -> Started:
    """`goto: "__end__"`: the run is the update's turn, ended at once (no model call); its stream
    opens with the thread's values and closes on the `done` its log is given."""
    live = chat_queue.require_bus(bus)  # refused before anything is written: the run's end is on the bus

    def write(session: Session) -> Started:
        _ensure_thread(session, user, thread_id, body)
        run = command.end_turn(session, user, thread_id, asked.said or [], body, mode)
        return Started(run, _stream_of(session, run, modes))

    started = await db.run(write)
    await command.ended(live, started.run.id)
    return started


async def _resume(db: Database, bus: Bus | None, user: Principal, thread_id: str, resume: Any,
                  modes: frozenset[str], webhook: str | None = None) -> Started:
    """The run that waited goes on. A `webhook` is owed one more callback at its next end (the
    resume is a new run for LangGraph, with a webhook of its own); written before the approval is
    sent, so that end cannot come first, and removed if the approval is refused."""
    decision = decision_of(resume)
    if bus is None or not bus.connected:
        raise ApiProblem(503, "Service Unavailable", "The message bus is not connected.")

    def waiting(session: Session) -> ChatRun:
        threads.load(session, user, thread_id)
        run = threads.waiting_run(session, thread_id)
        if run is None:
            raise ApiProblem(409, "Conflict", f"Thread {thread_id} waits for no approval.")
        return run

    run = await db.run(waiting)
    request = await last_event(bus, run.id, "exec")
    if not isinstance(request, ApprovalRequestEvent):
        raise ApiProblem(409, "Conflict", f"Run {run.id} waits for no approval.")
    if decision.args is not None and request.call_id is None:
        raise ApiProblem(422, "Invalid request", "`command.resume.decisions[0].type: edit` is not supported here: "
                                                 "this approval is not a tool call's (its `allowed_decisions`).",
                         errors=[{"code": "unsupported", "field": "command.resume.decisions[0].type",
                                  "message": "edit"}])
    owed = await db.run(deliveries.owe, run.id, user.id, webhook, "lg") if webhook is not None else None
    try:
        await chat_runs.approve(db, bus, user, run.id, decision)
    except Exception:
        if owed is not None:
            await db.run(deliveries.drop_waiting, owed)
        raise
    stream = await db.run(_stream_of, run, modes)
    return Started(run, stream, opening_at=request.n)


async def cancel(db: Database, bus: Bus, user: Principal, thread_id: str, run_id: str, action: str) -> None:
    """`action=rollback` also removes the run's turn from the thread once it has stopped."""

    def mark(session: Session) -> None:
        run = load(session, user, thread_id, run_id)
        if action == "rollback":
            run.stop_reason = "rollback"
            session.add(run)

    await db.run(mark)
    await chat_runs.cancel(db, bus, user, run_id)


def remove_run(session: Session, user: Principal, thread_id: str, run_id: str) -> None:
    """An ended run goes with its turn (its question and answer: the run is the turn's checkpoint)."""
    run = load(session, user, thread_id, run_id)
    if run.ended_at is None:
        raise ApiProblem(409, "Conflict", f"Run {run_id} has not ended: cancel it first.")
    for message in session.exec(select(ChatMessage).where(ChatMessage.run_id == run.id)):
        session.delete(message)
    session.delete(run)


def remove_thread(session: Session, user: Principal, thread_id: str) -> tuple[list[str], set[str]]:
    threads.load(session, user, thread_id)
    return conversations.remove(session, user, thread_id)


async def delete_thread(db: Database, bus: Bus | None, user: Principal, thread_id: str) -> None:
    """The conversation goes with its messages and runs; its going runs are stopped."""
    going, started = await db.run(remove_thread, user, thread_id)
    await chat_runs.stop_all(db, bus, user, going, started)


def frames(state: Any, db: Database, bus: Bus, started: Started, translator: LgFrames) -> AsyncIterator[bytes]:
    """The run's stream in the translator's frames, from the gateway's feed of the run; its
    closing `end` (or `error`) once the run's record agrees with it (`state`: the app's)."""
    run_id = started.run.id
    return run_frames(state, bus, run_id, translator, live=True,
                      before_closing=lambda: settled(db, bus, state.record_watch, run_id))


async def wait(state: Any, db: Database, bus: Bus, started: Started) -> dict[str, Any]:
    """The thread's values once the run has ended or waits (its record then agrees); a failed
    run's are `{"__error__": {error, message}}`, as the SDK's `wait` reads them."""
    translator = LgFrames(started.stream, opening_at=started.opening_at)
    async for _ in frames(state, db, bus, started, translator):
        pass
    if translator.values is None:
        raise ApiProblem(503, "Service Unavailable", f"The gateway stopped following run {started.run.id}.")
    return translator.values


def cancel_when_dropped(db: Database, bus: Bus, user: Principal, run: ChatRun) -> Callable[[], None]:
    """`on_disconnect: cancel`: what to call when the reader left before the stream's end."""

    async def stop() -> None:
        try:
            await chat_runs.cancel(db, bus, user, run.id)
        except Exception as exc:  # ended meanwhile, or the bus went away
            log.info("run %s not cancelled on disconnect: %s", run.id, exc)

    return lambda: spawn(stop(), f"lg-disconnect-{run.id}")


async def start_stateless(state: Any, db: Database, bus: Bus, user: Principal, body: RunCreate,
                          guard: Guard, before_queue: BeforeQueue | None = None) -> tuple[Started, Callable[[], None]]:
    """A run on a thread of its own, and what to call once its reader is done: the thread is then
    deleted as soon as the run has ended or stopped at an approval, unless `on_completion: keep`.
    A run waiting for an approval is stopped with it: nobody could resume it without its thread."""
    conversation, _ = await db.run(threads.create, user, threads.NewThread())
    try:
        started = await start(db, bus, user, conversation.id, body, guard, before_queue)
    except Exception:
        await db.run(remove_thread, user, conversation.id)
        raise

    async def remove_when_ended() -> None:
        try:
            values_only = await db.run(stream_for, user, conversation.id, started.run.id, [])
            await wait(state, db, bus, Started(started.run, values_only))
            await delete_thread(db, bus, user, conversation.id)
        except Exception as exc:  # the bus went away: the thread stays, as a kept one would
            log.warning("stateless thread %s not removed: %s", conversation.id, exc)

    def done() -> None:
        if body.on_completion == "keep":
            return
        spawn(remove_when_ended(), f"lg-stateless-{conversation.id}")

    return started, done
