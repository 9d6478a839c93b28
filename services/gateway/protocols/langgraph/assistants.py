"""Assistants: the built-in chat agent in each mode (`chat-direct`, `chat-react`, `chat-plan`,
graph `chat`) and the caller's saved workflows (graph `workflow`, listed only: a workflow does
not run as a thread's turn)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat.modes import MODES, Mode
from services.gateway.pagination import MAX_OFFSET
from services.gateway.problems import ApiProblem
from services.gateway.tables import Workflow, aware

CHAT_GRAPH: Final = "chat"
WORKFLOW_GRAPH: Final = "workflow"
DEFAULT_MODE: Final[Mode] = "react"
_BUILT_IN_SINCE: Final = datetime(2026, 1, 1, tzinfo=UTC)
_DESCRIPTIONS: Final = {
    "direct": "The chat agent answering at once, without tools.",
    "react": "The chat agent using tools as it sees fit (ReAct).",
    "plan": "The chat agent proposing a plan, which waits for approval (an interrupt), then carrying it out.",
}


class AssistantSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")  # `select`, `sort_by`…: the order is fixed

    metadata: dict[str, Any] | None = None
    graph_id: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, max_length=200)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


def chat_id(mode: str) -> str:
    return f"{CHAT_GRAPH}-{mode}"


def _chat(mode: str) -> dict[str, Any]:
    return {"assistant_id": chat_id(mode), "graph_id": CHAT_GRAPH, "name": f"Agentix chat ({mode})",
            "description": _DESCRIPTIONS[mode], "config": {"configurable": {"mode": mode}}, "context": {},
            "metadata": {"mode": mode, "created_by": "system"}, "version": 1,
            "created_at": _BUILT_IN_SINCE, "updated_at": _BUILT_IN_SINCE}


def _workflow(wf: Workflow) -> dict[str, Any]:
    return {"assistant_id": wf.id, "graph_id": WORKFLOW_GRAPH, "name": wf.name, "description": None,
            "config": {}, "context": {}, "metadata": {"user_id": wf.user_id}, "version": 1,
            "created_at": aware(wf.created_at), "updated_at": aware(wf.updated_at)}


def chat_mode(assistant_id: str) -> Mode | None:
    """The chat mode an assistant (or the graph id `chat`) runs in; None for anything else."""
    if assistant_id == CHAT_GRAPH:
        return DEFAULT_MODE
    for mode in MODES:
        if assistant_id == chat_id(mode):
            return mode
    return None


def not_found(assistant_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No assistant {assistant_id!r}.")


def get(session: Session, user: Principal, assistant_id: str) -> dict[str, Any]:
    mode = chat_mode(assistant_id)
    if mode is not None:
        return _chat(mode)
    wf = session.get(Workflow, assistant_id)
    if wf is None or not user.can_see(wf.user_id):
        raise not_found(assistant_id)
    return _workflow(wf)


def _matches(assistant: dict[str, Any], query: AssistantSearch) -> bool:
    if query.graph_id and assistant["graph_id"] != query.graph_id:
        return False
    if query.name and query.name.lower() not in assistant["name"].lower():
        return False
    return all(assistant["metadata"].get(k) == v for k, v in (query.metadata or {}).items())


def search(session: Session, user: Principal, query: AssistantSearch) -> tuple[list[dict[str, Any]], int | None]:
    """One page (built-in first, then workflows newest first) and the next offset, if any."""
    built_in = [a for a in (_chat(m) for m in MODES) if _matches(a, query)]
    page = built_in[query.offset:query.offset + query.limit + 1]
    if len(page) <= query.limit and query.graph_id in (None, WORKFLOW_GRAPH):
        rows = select(Workflow).order_by(col(Workflow.created_at).desc(), col(Workflow.id).desc())
        if not user.is_admin:
            rows = rows.where(Workflow.user_id == user.id)
        if query.name:
            rows = rows.where(col(Workflow.name).icontains(query.name, autoescape=True))
        skip = max(0, query.offset - len(built_in))
        wanted = query.limit + 1 - len(page)
        if not query.metadata:  # metadata filters are matched here: read them all
            rows = rows.offset(skip).limit(wanted)
            skip = 0
        found = [a for a in (_workflow(w) for w in session.exec(rows)) if _matches(a, query)]
        page += found[skip:skip + wanted]
    more = len(page) > query.limit
    return page[:query.limit], (query.offset + query.limit if more else None)
