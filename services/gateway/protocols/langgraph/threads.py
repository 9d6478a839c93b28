"""Threads are conversations: a thread's `values` are `{messages}` in turn order, its status
follows its runs (busy while one goes, interrupted while one awaits approval, error when the
last one failed, else idle), and its interrupts are the approvals it waits for."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat import conversations
from services.gateway.chat.modes import MODES, Mode
from services.gateway.chat.queue import going
from services.gateway.chat.tables import ChatMessage, ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import messages
from services.gateway.protocols.langgraph.refusals import refuse_when_set
from services.gateway.protocols.langgraph.settled import settled
from services.gateway.protocols.langgraph.stream import interrupt_of
from services.gateway.runs.recorded import RecordWatch
from services.gateway.tables import aware
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import ApprovalRequestEvent

THREAD_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
FAILED = ("failed", "budget_exceeded")


NO_TTL = "a thread stays until it is deleted (or pruned)"


class NewThread(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread_id: str | None = Field(default=None, pattern=THREAD_ID)
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    ttl: Any = None
    supersteps: Any = None

    _no_ttl = refuse_when_set("ttl", why=NO_TTL)
    _no_supersteps = refuse_when_set("supersteps", why="a thread's state is made by its runs")


def not_found(thread_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No thread {thread_id!r}.")


def load(session: Session, user: Principal, thread_id: str) -> Conversation:
    conversation = session.get(Conversation, thread_id)
    if conversation is None or not user.can_see(conversation.user_id):
        raise not_found(thread_id)
    return conversation


def status_of(session: Session, conversation_id: str) -> ThreadStatus:
    runs = going(session, conversation_id)
    if runs:
        return "interrupted" if runs[0].state == "awaiting_approval" else "busy"
    last = session.exec(select(ChatRun.state).where(ChatRun.conversation_id == conversation_id)
                        .order_by(col(ChatRun.seq).desc()).limit(1)).first()
    return "error" if last in FAILED else "idle"


def waiting_run(session: Session, conversation_id: str) -> ChatRun | None:
    runs = going(session, conversation_id)
    return runs[0] if runs and runs[0].state == "awaiting_approval" else None


def history(session: Session, conversation_id: str, before_seq: int | None = None,
            runs: list[str] | None = None) -> list[dict[str, Any]]:
    """The thread's messages in turn order (those of turns before `before_seq` only, if given;
    of the turns `runs` only, a branch, if given)."""
    query = select(ChatMessage).where(ChatMessage.conversation_id == conversation_id)
    if before_seq is not None:
        query = query.where(col(ChatMessage.run_seq) < before_seq)
    if runs is not None:
        query = query.where(col(ChatMessage.run_id).in_(runs))
    rows = session.exec(query.order_by(col(ChatMessage.run_seq), col(ChatMessage.id)))
    return [messages.from_row(m) for m in rows]


def metadata_of(conversation: Conversation) -> dict[str, Any]:
    """The conversation's own (title, mode, model, owner), then what the client gave the thread."""
    return {"title": conversation.title, "mode": conversation.mode, "model": conversation.model,
            "user_id": conversation.user_id, **(conversation.meta or {})}


def view(session: Session, conversation: Conversation,
         interrupts: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    return {
        "thread_id": conversation.id,
        "created_at": aware(conversation.created_at),
        "updated_at": aware(conversation.last_activity_at),
        "metadata": metadata_of(conversation),
        "status": status_of(session, conversation.id),
        "values": {"messages": history(session, conversation.id)},
        "interrupts": interrupts or {},
    }


def create(session: Session, user: Principal, body: NewThread) -> tuple[Conversation, bool]:
    """The thread (a conversation, with the client's id if it chose one); True when it is new.
    Its metadata is kept as given; `metadata.title` and `metadata.mode` also set the conversation's."""
    if body.thread_id is not None:
        existing = session.get(Conversation, body.thread_id)
        if existing is not None:
            if body.if_exists == "do_nothing" and user.can_see(existing.user_id):
                return existing, False
            raise ApiProblem(409, "Conflict", f"Thread {body.thread_id!r} already exists.")
    meta = body.metadata or {}
    mode: Mode = meta["mode"] if meta.get("mode") in MODES else "react"
    title = meta.get("title") if isinstance(meta.get("title"), str) and 0 < len(meta["title"]) <= 200 else None
    created = conversations.create(session, user, conversations.NewConversation(title=title, mode=mode),
                                   body.thread_id)
    conversation = session.get(Conversation, created["id"])
    assert conversation is not None
    conversation.meta = dict(meta)
    session.add(conversation)
    session.flush()
    return conversation, True


def create_viewed(session: Session, user: Principal, body: NewThread) -> tuple[str, dict[str, Any] | None]:
    """`POST /threads`: the thread's id and, when it is new, its view from the same transaction
    (a new thread has no run to wait for and no interrupt); None for an existing one
    (`if_exists: do_nothing`), which `current` shows."""
    conversation, new = create(session, user, body)
    return conversation.id, view(session, conversation) if new else None


def mark_run(session: Session, conversation: Conversation, assistant_id: str, graph_id: str) -> None:
    """A run used the thread: its metadata names the assistant and graph, as LangGraph's do."""
    meta = dict(conversation.meta or {})
    if meta.get("assistant_id") != assistant_id or meta.get("graph_id") != graph_id:
        conversation.meta = {**meta, "assistant_id": assistant_id, "graph_id": graph_id}
        session.add(conversation)


async def _interrupts(db: Database, bus: Bus | None, thread_id: str) -> dict[str, list[dict[str, Any]]]:
    run = await db.run(waiting_run, thread_id)
    if run is None or bus is None or not bus.connected:
        return {}
    request = await last_event(bus, run.id, "exec")
    return {run.id: [interrupt_of(run.id, request)]} if isinstance(request, ApprovalRequestEvent) else {}


def run_to_join(session: Session, user: Principal, thread_id: str, stream_mode: list[str]) -> str:
    """`GET /threads/{id}/stream`: the run going (or waiting) now, else the thread's latest."""
    for mode in stream_mode:
        if mode != "run_modes":
            raise ApiProblem(422, "Invalid request", f"`stream_mode: {mode}` is not supported: a thread's stream is "
                                                     "its run's frames (`run_modes`).",
                             errors=[{"code": "unsupported", "field": "stream_mode", "message": mode}])
    load(session, user, thread_id)
    runs = going(session, thread_id)
    if runs:
        return runs[0].id
    last = session.exec(select(ChatRun.id).where(ChatRun.conversation_id == thread_id)
                        .order_by(col(ChatRun.seq).desc()).limit(1)).first()
    if last is None:
        raise ApiProblem(404, "Not Found", f"Thread {thread_id!r} has no run to join.")
    return last


def _active_run(session: Session, user: Principal, thread_id: str) -> str | None:
    load(session, user, thread_id)
    runs = going(session, thread_id)
    return runs[0].id if runs else None


async def pending(db: Database, bus: Bus | None, watch: RecordWatch | None, user: Principal,
                  thread_id: str) -> list[dict[str, Any]]:
    """The interrupts the thread waits on, once the records agree with its runs' streams."""
    await settled(db, bus, watch, await db.run(_active_run, user, thread_id))
    return [i for found in (await _interrupts(db, bus, thread_id)).values() for i in found]


async def current(db: Database, bus: Bus | None, watch: RecordWatch | None, user: Principal,
                  thread_id: str) -> dict[str, Any]:
    """The thread as its runs' streams have it (once the records agree), with its interrupts."""
    await settled(db, bus, watch, await db.run(_active_run, user, thread_id))
    interrupts = await _interrupts(db, bus, thread_id)
    return await db.run(lambda s: view(s, load(s, user, thread_id), interrupts))

