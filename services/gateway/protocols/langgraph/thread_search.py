"""Finding and keeping threads: search and count (metadata and values by subset match, status,
ids; sorted and paged), metadata updates, copies and pruning."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import asc, desc
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat import lineage
from services.gateway.chat.tables import ChatMessage, ChatRun, Conversation
from services.gateway.ids import new_id
from services.gateway.pagination import MAX_OFFSET
from services.gateway.protocols.langgraph import threads
from services.gateway.protocols.langgraph.refusals import refuse_when_set
from services.gateway.tables import now

SELECTABLE: Final = ("thread_id", "created_at", "updated_at", "metadata", "status", "values", "interrupts")
_COLUMNS: Final[dict[str, Any]] = {"thread_id": col(Conversation.id), "created_at": col(Conversation.created_at),
                                   "updated_at": col(Conversation.last_activity_at)}


class ThreadFilter(BaseModel):
    """`POST /threads/count`."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: threads.ThreadStatus | None = None


class ThreadSearch(ThreadFilter):
    """`POST /threads/search`."""

    ids: list[str] | None = Field(default=None, max_length=1000)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[Literal["thread_id", "created_at", "updated_at", "metadata", "status", "values",
                         "interrupts", "config", "error"]] | None = None
    extract: Any = None

    _no_extract = refuse_when_set("extract", why="`select` the fields, read the values from them")


class ThreadPatch(BaseModel):
    """`PATCH /threads/{id}`: the metadata given is merged into the thread's."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl: Any = None

    _no_ttl = refuse_when_set("ttl", why=threads.NO_TTL)


class Prune(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread_ids: list[str] = Field(max_length=1000)
    strategy: Literal["delete"] = "delete"


def _subset(found: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return all(found.get(k) == v for k, v in (wanted or {}).items())


def _matching(session: Session, user: Principal, query: ThreadFilter, ids: list[str] | None = None,
              sort_by: str | None = None, descending: bool = True) -> Iterator[tuple[Conversation, str]]:
    """The visible conversations that match, with their status, in order. Metadata and status are
    matched here (a status is computed from the runs), values last (they are the messages)."""
    column = _COLUMNS.get(sort_by or "updated_at", _COLUMNS["updated_at"])
    order = desc if descending else asc
    rows = select(Conversation).order_by(order(column), order(col(Conversation.id)))
    if not user.is_admin:
        rows = rows.where(Conversation.user_id == user.id)
    if ids:
        rows = rows.where(col(Conversation.id).in_(ids))
    for conversation in session.exec(rows):
        if not _subset(threads.metadata_of(conversation), query.metadata):
            continue
        status = threads.status_of(session, conversation.id)
        if query.status is not None and status != query.status:
            continue
        if query.values and not _subset({"messages": threads.history(session, conversation.id)}, query.values):
            continue
        yield conversation, status


def search(session: Session, user: Principal, query: ThreadSearch) -> list[dict[str, Any]]:
    """Newest activity first unless sorted otherwise."""
    descending = query.sort_order != "asc"
    found = list(_matching(session, user, query, query.ids, query.sort_by, descending))
    if query.sort_by == "status":
        found.sort(key=lambda pair: pair[1], reverse=descending)
    page = [threads.view(session, c) for c, _ in found[query.offset:query.offset + query.limit]]
    if query.select:
        page = [{k: thread.get(k) for k in query.select} for thread in page]
    return page


def count(session: Session, user: Principal, query: ThreadFilter) -> int:
    return sum(1 for _ in _matching(session, user, query))


def patch(session: Session, user: Principal, thread_id: str, body: ThreadPatch) -> Conversation:
    conversation = threads.load(session, user, thread_id)
    conversation.meta = {**(conversation.meta or {}), **body.metadata}
    conversation.last_activity_at = now()
    session.add(conversation)
    session.flush()
    return conversation


def copy(session: Session, user: Principal, thread_id: str) -> Conversation:
    """A new thread with the same messages and ended runs (runs still going are not copied)."""
    source = threads.load(session, user, thread_id)
    twin = Conversation(id=new_id("c"), user_id=source.user_id, title=source.title, model=source.model,
                        mode=source.mode, kb=source.kb, summary=source.summary, summarized=source.summarized,
                        meta=dict(source.meta or {}))
    session.add(twin)
    renamed: dict[str, str] = {}
    for run in session.exec(select(ChatRun).where(ChatRun.conversation_id == source.id)
                            .order_by(col(ChatRun.seq))):
        if run.ended_at is None:
            continue
        renamed[run.id] = new_id("t")
        # Its links to other turns name their copies: the copy keeps the branches (chat/lineage.py).
        follows = run.follows if run.follows == lineage.START else renamed.get(run.follows or "")
        session.add(ChatRun(**{**run.model_dump(), "id": renamed[run.id], "conversation_id": twin.id,
                               "follows": follows, "answers_again": renamed.get(run.answers_again or "")}))
    # In the order said: the copies' new ids order a turn's messages as the originals' did.
    for message in session.exec(select(ChatMessage).where(ChatMessage.conversation_id == source.id)
                                .order_by(col(ChatMessage.run_seq), col(ChatMessage.id))):
        if message.run_id is not None and message.run_id not in renamed:
            continue
        session.add(ChatMessage(**{**message.model_dump(), "id": new_id("m"), "conversation_id": twin.id,
                                   "run_id": renamed.get(message.run_id or "")}))
    session.flush()
    return twin
