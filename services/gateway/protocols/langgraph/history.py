"""A thread's checkpoints (checkpoints.py) as LangGraph states: a turn's question's, then the
turn's own, whose id is the id of the run that made it (its question and its answer, or where it
stands while it goes or waits). A question's parent is the turn it went on from (the turn before,
or an older one for a branch: chat/lineage.py); the values are the messages of the branch.
`GET/POST /threads/{id}/history` lists every branch's checkpoints newest first, `GET
/threads/{id}/state/{id}` reads one; the thread's state is its latest (docs/API.md, "LangGraph")."""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlmodel import Session

from services.gateway.access.principal import Principal
from services.gateway.chat import lineage
from services.gateway.chat.modes import ANSWER_NODE
from services.gateway.chat.states import RUN_TERMINAL
from services.gateway.chat.tables import Conversation
from services.gateway.protocols.langgraph import checkpoints, threads
from services.gateway.protocols.langgraph.run_request import checkpoint_id_of
from services.gateway.tables import aware

MAX_HISTORY: Final = 1000


class HistoryQuery(BaseModel):
    """`POST /threads/{id}/history` (the GET takes `limit` and `before` as query parameters)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=10, ge=1, le=MAX_HISTORY)
    before: str | dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    select: Any = None

    @field_validator("select")
    @classmethod
    def _no_select(cls, value: Any) -> Any:
        if value:
            raise ValueError("`select` is not supported: every state carries all its fields")
        return None


class StateQuery(BaseModel):
    """`POST /threads/{id}/state/checkpoint`."""

    model_config = ConfigDict(extra="forbid")

    checkpoint: dict[str, Any]
    subgraphs: bool = False  # the chat agent has no subgraphs: the state is the same
    select: Any = None

    @field_validator("select")
    @classmethod
    def _no_select(cls, value: Any) -> Any:
        if value:
            raise ValueError("`select` is not supported: every state carries all its fields")
        return None


def _ref(thread_id: str, checkpoint_id: str | None) -> dict[str, Any] | None:
    if checkpoint_id is None:
        return None
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id, "checkpoint_map": None}


def _state(session: Session, conversation: Conversation, point: checkpoints.Checkpoint, parents: lineage.Links,
           interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    run = point.run
    if run is None:  # the thread's start: its empty state
        start = {"source": "input", "step": point.step, "thread_id": conversation.id, "parents": {}}
        return {**_empty(conversation), "metadata": start, "checkpoint": _ref(conversation.id, point.id)}
    if point.question:
        said = checkpoints.asked_state(session, run, parents)
        waiting: list[dict[str, Any]] = []
        nodes = [ANSWER_NODE]
    else:
        said = threads.history(session, conversation.id, before_seq=run.seq + 1,
                               runs=lineage.branch_of(parents, run.id))
        waiting = [i for i in interrupts if i["value"].get("run_id") == run.id]
        going = run.state not in RUN_TERMINAL
        nodes = [i["value"]["node_id"] for i in waiting] or ([ANSWER_NODE] if going else [])
    metadata = {"source": "loop", "step": point.step, "run_id": run.id, "thread_id": conversation.id,
                "graph_id": (conversation.meta or {}).get("graph_id"),
                "assistant_id": (conversation.meta or {}).get("assistant_id"), "parents": {}, **(run.meta or {})}
    return {
        "values": {"messages": said},
        "next": nodes,
        "tasks": [{"id": i["id"], "name": i["value"]["node_id"], "path": [], "error": None, "interrupts": [i],
                   "checkpoint": None, "state": None, "result": None} for i in waiting]
                 or [{"id": run.id, "name": n, "path": [], "error": None, "interrupts": [], "checkpoint": None,
                      "state": None, "result": None} for n in nodes],
        "metadata": metadata,
        "created_at": aware(run.created_at if point.question else run.ended_at or run.created_at),
        "checkpoint": _ref(conversation.id, point.id),
        "parent_checkpoint": _ref(conversation.id, point.parent),
        "interrupts": waiting,
    }


def _empty(conversation: Conversation) -> dict[str, Any]:
    return {"values": {"messages": []}, "next": [], "tasks": [], "metadata": threads.metadata_of(conversation),
            "created_at": aware(conversation.created_at),
            "checkpoint": {"thread_id": conversation.id, "checkpoint_ns": "", "checkpoint_id": None,
                           "checkpoint_map": None},
            "parent_checkpoint": None, "interrupts": []}


def states(session: Session, user: Principal, thread_id: str, interrupts: list[dict[str, Any]],
           query: HistoryQuery) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first: from `checkpoint` (itself included) or before
    `before` (itself excluded), those whose metadata has `metadata`, at most `limit`."""
    conversation = threads.load(session, user, thread_id)
    points, parents = checkpoints.of_thread(session, thread_id)
    ids = [p.id for p in points]
    end = len(points)
    start_at, before = checkpoint_id_of(query.checkpoint), checkpoint_id_of(query.before)
    for wanted, offset in ((start_at, 1), (before, 0)):
        if wanted is not None:
            if wanted not in ids:
                raise checkpoints.not_found(thread_id, wanted)
            end = min(end, ids.index(wanted) + offset)
    found: list[dict[str, Any]] = []
    for at in range(end - 1, -1, -1):
        state = _state(session, conversation, points[at], parents, interrupts)
        if all(state["metadata"].get(k) == v for k, v in (query.metadata or {}).items()):
            found.append(state)
        if len(found) >= query.limit:
            break
    return found


def state_at(session: Session, user: Principal, thread_id: str, interrupts: list[dict[str, Any]],
             checkpoint_id: str | None) -> dict[str, Any]:
    """The thread's state at a checkpoint (None: its latest; a thread with no turn: empty)."""
    conversation = threads.load(session, user, thread_id)
    points, parents = checkpoints.of_thread(session, thread_id)
    if not points and checkpoint_id is None:
        return _empty(conversation)
    found = points[-1] if checkpoint_id is None else next((p for p in points if p.id == checkpoint_id), None)
    if found is None:
        raise checkpoints.not_found(thread_id, checkpoint_id or "")
    return _state(session, conversation, found, parents, interrupts)
