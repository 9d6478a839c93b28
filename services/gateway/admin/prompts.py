"""Versioned prompts: new versions are stored, activation (and a canary share) is hot."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy import func
from sqlmodel import Session, col, select

from services.gateway.db import get_or_create_locked
from services.gateway.pagination import Page, keyed_page
from services.gateway.problems import ApiProblem
from services.gateway.tables import Prompt, PromptVersionRow, aware, now

NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,100}$"


class VersionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=100_000)
    note: str | None = Field(default=None, max_length=500)


class ActivateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    canary_version: int | None = Field(default=None, ge=1)
    canary_percent: int = Field(default=0, ge=0, le=100)

    @model_validator(mode="after")
    def _canary(self) -> ActivateIn:
        if self.canary_percent and self.canary_version is None:
            raise ValueError("canary_percent needs canary_version")
        return self


def _version_view(row: PromptVersionRow) -> dict[str, Any]:
    return {
        "version": row.version,
        "text": row.text,
        "note": row.note,
        "created_by": row.created_by,
        "created_at": aware(row.created_at),
    }


def _prompt_view(session: Session, prompt: Prompt) -> dict[str, Any]:
    versions = session.exec(
        select(PromptVersionRow).where(PromptVersionRow.name == prompt.name).order_by(col(PromptVersionRow.version))
    )
    return {
        "name": prompt.name,
        "active_version": prompt.active_version,
        "canary_version": prompt.canary_version,
        "canary_percent": prompt.canary_percent,
        "revision": prompt.revision,
        "updated_at": aware(prompt.updated_at),
        "versions": [_version_view(v) for v in versions],
    }


def list_page(session: Session, limit: int, cursor: str | None) -> Page:
    """Prompts (with their versions) by name, a page at a time."""
    return keyed_page(session, Prompt, "name", limit, cursor, lambda prompt: _prompt_view(session, prompt))


def get(session: Session, name: str) -> dict[str, Any]:
    prompt = session.get(Prompt, name)
    if prompt is None:
        raise ApiProblem(404, "Not Found", f"No prompt {name!r}.")
    return _prompt_view(session, prompt)


def add_version(session: Session, name: str, body: VersionIn, by: str) -> dict[str, Any]:
    prompt = get_or_create_locked(session, Prompt, name=name)
    latest = session.exec(select(func.max(PromptVersionRow.version)).where(PromptVersionRow.name == name)).one()
    row = PromptVersionRow(name=name, version=int(latest or 0) + 1, text=body.text, note=body.note, created_by=by)
    session.add(row)
    prompt.updated_at = now()
    session.add(prompt)
    return _version_view(row) | {"name": name}


def activate(session: Session, name: str, body: ActivateIn) -> None:
    prompt = session.exec(select(Prompt).where(Prompt.name == name).with_for_update()).first()
    if prompt is None:
        raise ApiProblem(404, "Not Found", f"No prompt {name!r}.")
    for version in filter(None, (body.version, body.canary_version)):
        if session.get(PromptVersionRow, (name, version)) is None:
            raise ApiProblem(422, "Invalid request", f"Prompt {name!r} has no version {version}.")
    prompt.active_version = body.version
    prompt.canary_version = body.canary_version if body.canary_percent else None
    prompt.canary_percent = body.canary_percent
    prompt.revision += 1
    prompt.updated_at = now()
    session.add(prompt)
