"""Assistants made through `/lg` (`POST /assistants`): the chat agent (graph `chat`) with a config
of its own — its mode and model, in `config.configurable` or `context` — owned by their creator.
Every create or update is a new version, kept; `set_latest` puts an earlier one back in use."""

from __future__ import annotations

import uuid
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, func, select

from services.gateway.access.principal import Principal
from services.gateway.chat.modes import MODES
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import recursion
from services.gateway.protocols.langgraph.refusals import refused
from services.gateway.tables import LgAssistant, LgAssistantVersion, aware, now

CHAT_GRAPH: Final = "chat"
KEYS: Final = ("mode", "model")  # what a chat assistant's config may set
_ID: Final = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
_WHY: Final = {
    "system_prompt": "the chat agent's system prompt is its mode's",
    "tools": "the chat agent's tools are the ones the caller may use (mode `react`/`plan`) or none (`direct`)",
}


class AssistantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    assistant_id: str | None = Field(default=None, pattern=_ID)
    graph_id: str = Field(min_length=1, max_length=64)
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=10_000)


class AssistantPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph_id: str | None = Field(default=None, min_length=1, max_length=64)
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=10_000)


def check_graph(graph_id: str) -> None:
    if graph_id != CHAT_GRAPH:
        raise refused("graph_id", "an assistant made here runs the chat agent (graph `chat`); a saved workflow "
                                  "is an assistant already (its id), made with POST /api/v1/workflows")


def _check_settings(field: str, given: dict[str, Any]) -> None:
    for key, value in given.items():
        if key not in KEYS:
            raise refused(f"{field}.{key}", _WHY.get(key, f"not supported (a chat assistant sets {', '.join(KEYS)})"))
        if key == "mode" and value not in MODES:
            raise refused(f"{field}.mode", f"one of {', '.join(MODES)}")
        if key == "model" and not (isinstance(value, str) and 0 < len(value) <= 200):
            raise refused(f"{field}.model", "a model name")


def check_config(config: dict[str, Any] | None, context: dict[str, Any] | None) -> None:
    """Only `configurable`/`context` `{mode, model}` and a `recursion_limit` that holds
    (recursion.py): anything else is refused, by name."""
    for key, value in (config or {}).items():
        if key == "recursion_limit":
            if (why := recursion.why_not(value)) is not None:
                raise refused("config.recursion_limit", why)
            continue
        if key != "configurable":
            raise refused(f"config.{key}", "not supported (an assistant's config is `configurable: {mode, model}` "
                                           "and `recursion_limit`)")
        if not isinstance(value, dict):
            raise refused("config.configurable", "an object")
        _check_settings("config.configurable", value)
    _check_settings("context", context or {})


def settings_of(row: LgAssistant) -> dict[str, Any]:
    """The assistant's `{mode?, model?}` (its context over its configurable)."""
    return {**((row.config or {}).get("configurable") or {}), **(row.context or {})}


def view(row: LgAssistant | LgAssistantVersion, owner: str, updated: Any = None) -> dict[str, Any]:
    return {"assistant_id": row.assistant_id if isinstance(row, LgAssistantVersion) else row.id,
            "graph_id": row.graph_id, "name": row.name, "description": row.description,
            "config": row.config or {}, "context": row.context or {},
            "metadata": {**(row.meta or {}), "user_id": owner},
            "version": row.version, "created_at": aware(row.created_at),
            "updated_at": aware(updated if updated is not None else row.created_at)}


def head_view(row: LgAssistant) -> dict[str, Any]:
    return {**view(row, row.user_id, row.updated_at), "created_at": aware(row.created_at)}


def load(session: Session, user: Principal, assistant_id: str) -> LgAssistant | None:
    row = session.get(LgAssistant, assistant_id)
    return row if row is not None and user.can_see(row.user_id) else None


def _record(session: Session, row: LgAssistant) -> None:
    session.add(LgAssistantVersion(assistant_id=row.id, version=row.version, graph_id=row.graph_id, name=row.name,
                                   description=row.description, config=row.config, context=row.context,
                                   meta=row.meta))


def create(session: Session, user: Principal, body: AssistantIn, taken: bool) -> dict[str, Any]:
    """`taken`: the id names a built-in assistant or a workflow."""
    check_graph(body.graph_id)
    check_config(body.config, body.context)
    if body.assistant_id is not None:
        existing = session.get(LgAssistant, body.assistant_id)
        if existing is not None and body.if_exists == "do_nothing" and user.can_see(existing.user_id):
            return head_view(existing)
        if existing is not None or taken:
            raise ApiProblem(409, "Conflict", f"Assistant {body.assistant_id!r} already exists.")
    row = LgAssistant(id=body.assistant_id or str(uuid.uuid4()), user_id=user.id, graph_id=body.graph_id,
                      name=body.name or "Untitled", description=body.description, config=body.config or {},
                      context=body.context or {}, meta=body.metadata or {})
    session.add(row)
    _record(session, row)
    return head_view(row)


def update(session: Session, row: LgAssistant, body: AssistantPatch) -> dict[str, Any]:
    """A new version: what the patch gives replaces the latest version's (metadata is merged)."""
    if body.graph_id is not None:
        check_graph(body.graph_id)
    config = body.config if body.config is not None else row.config
    context = body.context if body.context is not None else row.context
    check_config(config, context)
    last = session.exec(select(func.max(LgAssistantVersion.version))
                        .where(LgAssistantVersion.assistant_id == row.id)).one()
    row.config, row.context = config or {}, context or {}
    row.meta = {**(row.meta or {}), **(body.metadata or {})}
    row.name = body.name or row.name
    row.description = body.description if body.description is not None else row.description
    row.version, row.updated_at = (last or 0) + 1, now()
    session.add(row)
    _record(session, row)
    return head_view(row)


def delete(session: Session, row: LgAssistant) -> None:
    for version in session.exec(select(LgAssistantVersion).where(LgAssistantVersion.assistant_id == row.id)):
        session.delete(version)
    session.delete(row)


def versions(session: Session, row: LgAssistant, metadata: dict[str, Any] | None, limit: int,
             offset: int) -> list[dict[str, Any]]:
    """Newest first; `metadata` matches as a subset."""
    query = (select(LgAssistantVersion).where(LgAssistantVersion.assistant_id == row.id)
             .order_by(col(LgAssistantVersion.version).desc()))
    found = [view(v, row.user_id) for v in session.exec(query)]
    found = [v for v in found if all(v["metadata"].get(k) == w for k, w in (metadata or {}).items())]
    return found[offset:offset + limit]


def set_latest(session: Session, row: LgAssistant, version: int) -> dict[str, Any]:
    chosen = session.exec(select(LgAssistantVersion).where(LgAssistantVersion.assistant_id == row.id,
                                                           LgAssistantVersion.version == version)).first()
    if chosen is None:
        raise ApiProblem(404, "Not Found", f"Assistant {row.id!r} has no version {version}.")
    row.graph_id, row.name, row.description = chosen.graph_id, chosen.name, chosen.description
    row.config, row.context, row.meta = chosen.config, chosen.context, chosen.meta
    row.version, row.updated_at = version, now()
    session.add(row)
    return head_view(row)


def mine(session: Session, user: Principal) -> list[dict[str, Any]]:
    query = select(LgAssistant).order_by(col(LgAssistant.created_at).desc(), col(LgAssistant.id).desc())
    if not user.is_admin:
        query = query.where(LgAssistant.user_id == user.id)
    return [head_view(r) for r in session.exec(query)]
