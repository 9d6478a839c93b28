"""A conversation's messages: the user's (written when the message is posted), the assistant's
(written by the recorder when a run ends), reading them in turn order, and what of them a new
run's agents may remember (`memory.py` chooses how)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_
from sqlmodel import Session, col, delete, select

from services.gateway.chat.tables import ChatMessage
from services.gateway.ids import new_id
from services.gateway.pagination import Page, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from services.gateway.tables import aware

# Only what was said goes back to the model: an error sentence is the gateway's, not a turn.
HISTORY_TYPES = ("text", "interrupted")


def view(message: ChatMessage) -> dict[str, Any]:
    return {
        "id": message.id,
        "conversation_id": message.conversation_id,
        "run_id": message.run_id,
        "role": message.role,
        "content": message.content,
        "message_type": message.message_type,
        "tool_events": message.tool_events or [],
        "thinking": message.thinking,
        "usage": message.usage,
        "model": message.model,
        "created_at": aware(message.created_at),
    }


def add(session: Session, conversation_id: str, run_id: str | None, run_seq: int, role: str, content: str,
        **fields: Any) -> ChatMessage:
    message = ChatMessage(id=new_id("m"), conversation_id=conversation_id, run_id=run_id, run_seq=run_seq,
                          role=role, content=content, **fields)
    session.add(message)
    return message


def remove_run(session: Session, run_id: str) -> None:
    session.execute(delete(ChatMessage).where(col(ChatMessage.run_id) == run_id))


def of_run(session: Session, run_id: str) -> list[ChatMessage]:
    return list(session.exec(select(ChatMessage).where(ChatMessage.run_id == run_id)))


def said(session: Session, conversation_id: str, before_seq: int,
         runs: list[str] | None = None) -> list[dict[str, Any]]:
    """What was said in the turns before the run numbered `before_seq` (only those of `runs`,
    its branch, when the conversation branched), oldest first. Every run before it has ended, so
    on an unbranched conversation this list only ever grows at its end: a count of its first
    messages (what the running summary covers) stays true."""
    query = (select(ChatMessage)
             .where(ChatMessage.conversation_id == conversation_id, col(ChatMessage.run_seq) < before_seq,
                    col(ChatMessage.message_type).in_(HISTORY_TYPES)))
    if runs is not None:
        query = query.where(col(ChatMessage.run_id).in_(runs))
    rows = session.exec(query.order_by(col(ChatMessage.run_seq), col(ChatMessage.id)))
    return [{"role": m.role, "content": m.content} for m in rows if m.content]


def _cursor(message: ChatMessage) -> str:
    return encode_cursor(f"{message.run_seq}|{message.id}")


def _position(cursor: str) -> tuple[int, str]:
    try:
        seq, message_id = decode_cursor(cursor).split("|", 1)
        return int(seq), message_id
    except ValueError as exc:
        raise ApiProblem(400, "Bad Request", "The cursor is not valid.") from exc


def list_page(session: Session, conversation_id: str, limit: int, cursor: str | None, newest_first: bool) -> Page:
    """Turn order (a message queued while an answer streamed comes after that answer), oldest
    first unless `newest_first`."""
    seq, ident = col(ChatMessage.run_seq), col(ChatMessage.id)
    order = (seq.desc(), ident.desc()) if newest_first else (seq, ident)
    query = select(ChatMessage).where(ChatMessage.conversation_id == conversation_id).order_by(*order).limit(limit + 1)
    if cursor:
        at_seq, at_id = _position(cursor)
        if newest_first:
            query = query.where(or_(seq < at_seq, and_(seq == at_seq, ident < at_id)))
        else:
            query = query.where(or_(seq > at_seq, and_(seq == at_seq, ident > at_id)))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(items=[view(m) for m in rows], next_cursor=_cursor(rows[-1]) if more else None)
