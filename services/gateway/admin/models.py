"""Model configs (API keys encrypted, never returned) and the failover chain."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from services.gateway.admin.control_publisher import CHAIN_KEY, bump
from services.gateway.ids import new_id
from services.gateway.pagination import Page, keyed_page
from services.gateway.problems import ApiProblem
from services.gateway.tables import ControlValue, ModelRow, aware, now
from shared.contract.models import OFFLINE_MODEL, ModelParams
from shared.secrets import encrypt_secret

NAME_PATTERN = r"^[A-Za-z0-9_.:-]{1,100}$"


class ModelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="alias used by chains and DSL `model`")
    provider: Literal["openai", "offline"] = "openai"
    base_url: str | None = Field(default=None, max_length=500)
    model: str = Field(min_length=1, max_length=200)
    api_key: str | None = Field(default=None, max_length=4096, description="write-only; stored encrypted")
    params: ModelParams = Field(default_factory=ModelParams)
    enabled: bool = True

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http(s) URL")
        return value


class ChainIn(BaseModel):
    """`active: null` (with no fallbacks) clears the chain: every dispatcher goes back to its
    built-in model (the `AGENTIX_LLM_*` endpoint, else the offline model)."""

    model_config = ConfigDict(extra="forbid")

    active: str | None = Field(pattern=NAME_PATTERN)
    fallbacks: list[str] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _fallbacks_need_active(self) -> ChainIn:
        if self.active is None and self.fallbacks:
            raise ValueError("fallbacks need an active model; send {\"active\": null, \"fallbacks\": []} to clear")
        return self


def view(row: ModelRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "provider": row.provider,
        "base_url": row.base_url,
        "model": row.model,
        "params": row.params or {},
        "enabled": row.enabled,
        "has_api_key": bool(row.api_key_enc),
        "created_at": aware(row.created_at),
        "updated_at": aware(row.updated_at),
    }


def _touch_chain(session: Session, by: str) -> None:
    """A model changed: bump the chain's revision so every replica re-applies it."""
    row = session.get(ControlValue, CHAIN_KEY)
    if row is not None:
        bump(session, CHAIN_KEY, dict(row.value), by)


def _load(session: Session, model_id: str) -> ModelRow:
    row = session.get(ModelRow, model_id)
    if row is None:
        raise ApiProblem(404, "Not Found", f"No model {model_id!r}.")
    return row


def _apply(row: ModelRow, body: ModelIn, secret: str) -> None:
    row.name, row.provider, row.base_url, row.model = body.name, body.provider, body.base_url, body.model
    row.params = body.params.model_dump(mode="json", exclude_none=True)
    row.enabled = body.enabled
    if body.api_key:
        row.api_key_enc = encrypt_secret(body.api_key, secret)
    row.updated_at = now()


def _name_taken(exc: IntegrityError, name: str) -> ApiProblem:
    return ApiProblem(409, "Conflict", f"A model named {name!r} exists already.")


def create(session: Session, body: ModelIn, secret: str, by: str) -> dict[str, Any]:
    if session.exec(select(ModelRow).where(ModelRow.name == body.name)).first() is not None:
        raise ApiProblem(409, "Conflict", f"A model named {body.name!r} exists already.")
    row = ModelRow(id=new_id("m"), name=body.name, model=body.model)
    _apply(row, body, secret)
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise _name_taken(exc, body.name) from exc
    _touch_chain(session, by)
    return view(row)


def update(session: Session, model_id: str, body: ModelIn, secret: str, by: str) -> dict[str, Any]:
    row = _load(session, model_id)
    if body.name != row.name:
        _refuse_if_chained(session, row.name, "renamed")
    _apply(row, body, secret)
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise _name_taken(exc, body.name) from exc
    _touch_chain(session, by)
    return view(row)


def _refuse_if_chained(session: Session, name: str, action: str) -> None:
    chain = session.get(ControlValue, CHAIN_KEY)
    if chain is not None and name in [chain.value.get("active"), *chain.value.get("fallbacks", [])]:
        raise ApiProblem(
            409,
            "Conflict",
            f"Model {name!r} is in the failover chain; change the chain first "
            '(PUT /admin/models/chain {"active": null} goes back to the built-in model).',
        )


def delete(session: Session, model_id: str, by: str) -> None:
    row = _load(session, model_id)
    _refuse_if_chained(session, row.name, "deleted")
    session.delete(row)
    session.flush()
    _touch_chain(session, by)


def get(session: Session, model_id: str) -> dict[str, Any]:
    return view(_load(session, model_id))


def list_page(session: Session, limit: int, cursor: str | None) -> Page:
    """Models by name, a page at a time."""
    return keyed_page(session, ModelRow, "name", limit, cursor, view)


def set_chain(session: Session, body: ChainIn, by: str) -> int:
    if body.active is None:
        return bump(session, CHAIN_KEY, {"active": None, "fallbacks": []}, by)
    names = [body.active, *body.fallbacks]
    if len(set(names)) != len(names):
        raise ApiProblem(422, "Invalid request", "A model appears twice in the chain.")
    # The offline model is built into every dispatcher: it needs no row to be chained.
    known = {OFFLINE_MODEL} | {r.name for r in session.exec(select(ModelRow).where(col(ModelRow.name).in_(names)))}
    missing = [n for n in names if n not in known]
    if missing:
        raise ApiProblem(
            422,
            "Invalid request",
            f"Unknown model(s) in the chain: {', '.join(missing)}.",
            errors=[{"code": "unknown_model", "message": n, "field": "active/fallbacks"} for n in missing],
        )
    return bump(session, CHAIN_KEY, {"active": body.active, "fallbacks": body.fallbacks}, by)
