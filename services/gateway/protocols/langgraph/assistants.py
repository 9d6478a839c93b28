"""Assistants: the built-in chat agent in each mode (`chat-direct`, `chat-react`, `chat-plan`,
graph `chat`), the assistants made through `/lg` (the chat agent with a config of their own, see
`assistant_store`), and the caller's saved workflows (graph `workflow`: their graph is the DSL;
a workflow does not run as a thread's turn)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway import workflow_versions, workflows
from services.gateway.access.principal import Principal
from services.gateway.chat.modes import MODES, Mode, graph_for
from services.gateway.pagination import MAX_OFFSET
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import assistant_graph, assistant_store
from services.gateway.protocols.langgraph.listing import page_of
from services.gateway.tables import LgAssistant, Workflow, aware

CHAT_GRAPH: Final = "chat"
WORKFLOW_GRAPH: Final = "workflow"
DEFAULT_MODE: Final[Mode] = "react"
FIELDS: Final = ("assistant_id", "graph_id", "name", "description", "config", "context", "metadata", "version",
                 "created_at", "updated_at")
Field_ = Literal["assistant_id", "graph_id", "name", "description", "config", "context", "metadata", "version",
                 "created_at", "updated_at"]
_BUILT_IN_SINCE: Final = datetime(2026, 1, 1, tzinfo=UTC)
_DESCRIPTIONS: Final = {
    "direct": "The chat agent answering at once, without tools.",
    "react": "The chat agent using tools as it sees fit (ReAct).",
    "plan": "The chat agent proposing a plan, which waits for approval (an interrupt), then carrying it out.",
}


class AssistantCount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] | None = None
    graph_id: str | None = Field(default=None, max_length=200)
    name: str | None = Field(default=None, max_length=200)


class AssistantSearch(AssistantCount):
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[Field_] | None = Field(default=None, min_length=1)


class VersionSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


class Latest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)


def chat_id(mode: str) -> str:
    return f"{CHAT_GRAPH}-{mode}"


def _chat(mode: str) -> dict[str, Any]:
    return {"assistant_id": chat_id(mode), "graph_id": CHAT_GRAPH, "name": f"Agentix chat ({mode})",
            "description": _DESCRIPTIONS[mode], "config": {"configurable": {"mode": mode}}, "context": {},
            "metadata": {"mode": mode, "created_by": "system"}, "version": 1,
            "created_at": _BUILT_IN_SINCE, "updated_at": _BUILT_IN_SINCE}


def _workflow(wf: Workflow, version: int = 1) -> dict[str, Any]:
    return {"assistant_id": wf.id, "graph_id": WORKFLOW_GRAPH, "name": wf.name, "description": None,
            "config": {}, "context": {}, "metadata": {"user_id": wf.user_id}, "version": version,
            "created_at": aware(wf.created_at), "updated_at": aware(wf.updated_at)}


def chat_mode(assistant_id: str) -> Mode | None:
    """The chat mode a built-in assistant (or the graph id `chat`) runs in; None for anything else."""
    if assistant_id == CHAT_GRAPH:
        return DEFAULT_MODE
    for mode in MODES:
        if assistant_id == chat_id(mode):
            return mode
    return None


def not_found(assistant_id: str) -> ApiProblem:
    return ApiProblem(404, "Not Found", f"No assistant {assistant_id!r}.")


def _own_workflow(session: Session, user: Principal, assistant_id: str) -> Workflow | None:
    wf = session.get(Workflow, assistant_id)
    return wf if wf is not None and user.can_see(wf.user_id) else None


def get(session: Session, user: Principal, assistant_id: str) -> dict[str, Any]:
    mode = chat_mode(assistant_id)
    if mode is not None:
        return _chat(mode)
    made = assistant_store.load(session, user, assistant_id)
    if made is not None:
        return assistant_store.head_view(made)
    wf = _own_workflow(session, user, assistant_id)
    if wf is None:
        raise not_found(assistant_id)
    last = workflow_versions.latest(session, wf.id)
    return _workflow(wf, last.version if last else 1)


def runnable(session: Session, user: Principal, assistant_id: str) -> tuple[Mode, str | None]:
    """The chat mode and model (None: the caller's default) a run of this assistant uses."""
    mode = chat_mode(assistant_id)
    if mode is not None:
        return mode, None
    made = assistant_store.load(session, user, assistant_id)
    if made is not None:
        settings = assistant_store.settings_of(made)
        return settings.get("mode", DEFAULT_MODE), settings.get("model")
    get(session, user, assistant_id)  # 404 when it is nobody's assistant
    raise ApiProblem(422, "Invalid request", f"Assistant {assistant_id!r} is a saved workflow: workflows "
                                             "do not run as a thread's turn (use POST /api/v1/tasks).")


def _matches(assistant: dict[str, Any], query: AssistantCount) -> bool:
    if query.graph_id and assistant["graph_id"] != query.graph_id:
        return False
    if query.name and query.name.lower() not in assistant["name"].lower():
        return False
    return all(assistant["metadata"].get(k) == v for k, v in (query.metadata or {}).items())


def _all(session: Session, user: Principal, query: AssistantCount) -> list[dict[str, Any]]:
    """Built-in first, then the caller's own (made here, then workflows), newest first."""
    found = [_chat(m) for m in MODES]
    if query.graph_id in (None, CHAT_GRAPH):
        found += assistant_store.mine(session, user)
    if query.graph_id in (None, WORKFLOW_GRAPH):
        rows = select(Workflow).order_by(col(Workflow.created_at).desc(), col(Workflow.id).desc())
        if not user.is_admin:
            rows = rows.where(Workflow.user_id == user.id)
        if query.name:
            rows = rows.where(col(Workflow.name).icontains(query.name, autoescape=True))
        found += [_workflow(w) for w in session.exec(rows)]
    return [a for a in found if _matches(a, query)]


def search(session: Session, user: Principal, query: AssistantSearch) -> tuple[list[dict[str, Any]], int | None]:
    """One page and the next offset, if any; `sort_by`/`sort_order` and `select` as asked."""
    found = _all(session, user, query)
    return page_of(found, sort_by=query.sort_by, sort_order=query.sort_order, offset=query.offset, limit=query.limit,
                   select=query.select)


def count(session: Session, user: Principal, query: AssistantCount) -> int:
    return len(_all(session, user, query))


def graph(session: Session, user: Principal, assistant_id: str, xray: bool | int) -> dict[str, Any]:
    return assistant_graph.graph(_dsl(session, user, assistant_id), xray)


def _dsl(session: Session, user: Principal, assistant_id: str) -> dict[str, Any]:
    assistant = get(session, user, assistant_id)
    if assistant["graph_id"] == WORKFLOW_GRAPH:
        wf = _own_workflow(session, user, assistant_id)
        assert wf is not None
        return wf.dsl
    return graph_for(runnable(session, user, assistant_id)[0])


def schemas(session: Session, user: Principal, assistant_id: str) -> dict[str, Any]:
    assistant = get(session, user, assistant_id)
    if assistant["graph_id"] == WORKFLOW_GRAPH:
        return assistant_graph.workflow_schemas(WORKFLOW_GRAPH, _dsl(session, user, assistant_id))
    return assistant_graph.chat_schemas(CHAT_GRAPH)


def subgraphs(session: Session, user: Principal, assistant_id: str) -> dict[str, Any]:
    """A DSL graph nests no graph (a map's body and a coordinator's experts are drawn with `xray`)."""
    get(session, user, assistant_id)
    return {}


def versions(session: Session, user: Principal, assistant_id: str, query: VersionSearch) -> list[dict[str, Any]]:
    """Newest first: a workflow's saved versions, a made assistant's versions; a built-in has one."""
    assistant = get(session, user, assistant_id)
    made = assistant_store.load(session, user, assistant_id)
    if made is not None:
        return assistant_store.versions(session, made, query.metadata, query.limit, query.offset)
    found = [assistant]
    if assistant["graph_id"] == WORKFLOW_GRAPH:
        found = [{**assistant, "name": v["name"], "version": v["version"], "created_at": v["created_at"],
                  "updated_at": v["created_at"], "metadata": {**assistant["metadata"], "created_by": v["created_by"]}}
                 for v in workflow_versions.list_versions(session, assistant_id)]
    found = [a for a in found if all(a["metadata"].get(k) == v for k, v in (query.metadata or {}).items())]
    return found[query.offset:query.offset + query.limit]


def set_latest(session: Session, user: Principal, assistant_id: str, version: int) -> dict[str, Any]:
    """A made assistant uses that version again. A workflow is saved again as it was in that
    version (a new version: its history only grows); a built-in has only version 1."""
    assistant = get(session, user, assistant_id)
    made = assistant_store.load(session, user, assistant_id)
    if made is not None:
        return assistant_store.set_latest(session, made, version)
    if assistant["graph_id"] == WORKFLOW_GRAPH:
        old = workflow_versions.get_version(session, assistant_id, version)
        workflows.update(session, user, assistant_id,
                         workflows.WorkflowIn(name=old["name"], dsl=old["dsl"], layout=old["layout"]))
        session.flush()
        return get(session, user, assistant_id)
    if version != 1:
        raise ApiProblem(404, "Not Found", f"Assistant {assistant_id!r} has only version 1.")
    return assistant


def create(session: Session, user: Principal, body: assistant_store.AssistantIn) -> dict[str, Any]:
    taken = body.assistant_id is not None and (chat_mode(body.assistant_id) is not None
                                               or session.get(Workflow, body.assistant_id) is not None)
    return assistant_store.create(session, user, body, taken)


def _made(session: Session, user: Principal, assistant_id: str, verb: str) -> LgAssistant:
    made = assistant_store.load(session, user, assistant_id)
    if made is not None:
        return made
    assistant = get(session, user, assistant_id)  # 404 when it is nobody's
    where = ("a built-in assistant" if assistant["graph_id"] == CHAT_GRAPH
             else "a saved workflow (PUT or DELETE /api/v1/workflows/{id})")
    raise ApiProblem(409, "Conflict", f"Assistant {assistant_id!r} is {where}: it cannot be {verb} here.")


def update(session: Session, user: Principal, assistant_id: str,
           body: assistant_store.AssistantPatch) -> dict[str, Any]:
    return assistant_store.update(session, _made(session, user, assistant_id, "updated"), body)


def delete(session: Session, user: Principal, assistant_id: str) -> None:
    assistant_store.delete(session, _made(session, user, assistant_id, "deleted"))
