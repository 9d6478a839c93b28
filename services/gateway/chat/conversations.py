"""Conversations: create, read, list (pinned first, newest activity first), update, delete.
Owner-only; admins see all; another user's conversation is answered as none (404)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, or_, update
from sqlmodel import Session, col, delete, select

from services.gateway.access.principal import Principal
from services.gateway.chat.modes import Mode
from services.gateway.chat.tables import ChatMessage, ChatRun, Conversation
from services.gateway.ids import new_id
from services.gateway.pagination import Page, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from services.gateway.tables import Task, aware, now
from services.gateway.triggers import deliveries


class NewConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=200)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    mode: Mode = "react"
    kb: str | None = Field(default=None, min_length=1, max_length=200)


class ConversationPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=200)
    model: str | None = Field(default=None, max_length=200, description="empty string: back to the failover chain")
    mode: Mode | None = None
    kb: str | None = Field(default=None, max_length=200, description="empty string: no knowledge base")
    pinned: bool | None = None


def not_found(conversation_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No conversation {conversation_id!r}.")


def view(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "user_id": conversation.user_id,
        "title": conversation.title,
        "model": conversation.model,
        "mode": conversation.mode,
        "kb": conversation.kb,
        "pinned": conversation.pinned,
        "summary": conversation.summary,
        "summarized": conversation.summarized,
        "last_activity_at": aware(conversation.last_activity_at),
        "created_at": aware(conversation.created_at),
        "links": {"self": f"/api/v1/conversations/{conversation.id}",
                  "messages": f"/api/v1/conversations/{conversation.id}/messages"},
    }


def load_owned(session: Session, user: Principal, conversation_id: str) -> Conversation:
    conversation = session.get(Conversation, conversation_id)
    if conversation is None or not user.can_see(conversation.user_id):
        raise not_found(conversation_id)
    return conversation


def lock(session: Session, conversation_id: str) -> Conversation | None:
    """The conversation, locked for the rest of the transaction: every decision about its runs
    (which one is active, which one goes next) is taken under this lock, on any replica. The
    UPDATE comes first because SQLite has no row locks: a write is what makes its other writers
    wait, and on PostgreSQL it locks the row as `SELECT … FOR UPDATE` does."""
    session.execute(update(Conversation).where(col(Conversation.id) == conversation_id)
                    .values(last_activity_at=now()))
    return session.exec(select(Conversation).where(Conversation.id == conversation_id)
                        .with_for_update().execution_options(populate_existing=True)).one_or_none()


def lock_owned(session: Session, user: Principal, conversation_id: str) -> Conversation:
    conversation = lock(session, conversation_id)
    if conversation is None or not user.can_see(conversation.user_id):
        raise not_found(conversation_id)
    return conversation


def create(session: Session, user: Principal, body: NewConversation,
           conversation_id: str | None = None) -> dict[str, Any]:
    """`conversation_id`: an id the client chose (a LangGraph thread id), else a new one."""
    conversation = Conversation(id=conversation_id or new_id("c"), user_id=user.id,
                                title=body.title or "New conversation", model=body.model, mode=body.mode, kb=body.kb)
    session.add(conversation)
    session.flush()
    return view(conversation)


def patch(session: Session, user: Principal, conversation_id: str, body: ConversationPatch) -> dict[str, Any]:
    conversation = load_owned(session, user, conversation_id)
    changes = body.model_dump(exclude_unset=True)
    for key in ("title", "mode", "pinned"):
        if changes.get(key) is not None:
            setattr(conversation, key, changes[key])
    for key in ("model", "kb"):  # an empty string clears the default
        if key in changes:
            setattr(conversation, key, changes[key] or None)
    session.add(conversation)
    session.flush()
    return view(conversation)


def remove(session: Session, user: Principal, conversation_id: str) -> tuple[list[str], set[str]]:
    """Delete the conversation with its messages and runs. Returns the runs that were still
    going, and which of them had a task (those are to be cancelled, the others' streams ended)."""
    conversation = lock_owned(session, user, conversation_id)
    going = [r.id for r in session.exec(select(ChatRun).where(ChatRun.conversation_id == conversation.id))
             if r.ended_at is None]
    started = {run_id for run_id in going if session.get(Task, run_id) is not None}
    session.execute(delete(ChatMessage).where(col(ChatMessage.conversation_id) == conversation.id))
    session.execute(delete(ChatRun).where(col(ChatRun.conversation_id) == conversation.id))
    session.delete(conversation)
    deliveries.orphan(session, going, "its conversation was deleted before the run ended")
    return going, started


def _cursor(conversation: Conversation) -> str:
    stamp = aware(conversation.last_activity_at)
    assert stamp is not None
    return encode_cursor(f"{int(conversation.pinned)}|{stamp.isoformat()}|{conversation.id}")


def _after(cursor: str) -> Any:
    try:
        pinned_raw, stamp_raw, last_id = decode_cursor(cursor).split("|", 2)
        pinned, stamp = bool(int(pinned_raw)), datetime.fromisoformat(stamp_raw)
    except ValueError as exc:
        raise ApiProblem(400, "Bad Request", "The cursor is not valid.") from exc
    activity, ident = col(Conversation.last_activity_at), col(Conversation.id)
    same_pin = col(Conversation.pinned) == pinned
    later_page = or_(activity < stamp, and_(activity == stamp, ident < last_id))
    if pinned:  # after the pinned ones come all the others
        return or_(and_(same_pin, later_page), col(Conversation.pinned) == False)  # noqa: E712
    return and_(same_pin, later_page)


def list_page(session: Session, user: Principal, limit: int, cursor: str | None) -> Page:
    query = (select(Conversation)
             .order_by(col(Conversation.pinned).desc(), col(Conversation.last_activity_at).desc(),
                       col(Conversation.id).desc())
             .limit(limit + 1))
    if not user.is_admin:
        query = query.where(Conversation.user_id == user.id)
    if cursor:
        query = query.where(_after(cursor))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(items=[view(c) for c in rows], next_cursor=_cursor(rows[-1]) if more else None)
