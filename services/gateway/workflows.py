"""Saved workflows (canvas graphs): validated on save, owned by their creator."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway import workflow_versions as versions
from services.gateway.access.principal import Principal
from services.gateway.dsl import check_dsl
from services.gateway.ids import new_id
from services.gateway.pagination import Page, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from services.gateway.tables import Workflow, aware, now


class WorkflowIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    dsl: dict[str, Any]
    # Where the canvas placed each node (`{node_id: {x, y}}`): kept with the version, not in the DSL.
    layout: dict[str, Any] | None = None


def view(wf: Workflow, with_dsl: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": wf.id,
        "name": wf.name,
        "user_id": wf.user_id,
        "created_at": aware(wf.created_at),
        "updated_at": aware(wf.updated_at),
    }
    if with_dsl:
        out["dsl"] = wf.dsl
    return out


def load_owned(session: Session, user: Principal, workflow_id: str) -> Workflow:
    wf = session.get(Workflow, workflow_id)
    if wf is None or not user.can_see(wf.user_id):
        raise ApiProblem(404, "Not Found", f"No workflow {workflow_id!r}.")
    return wf


def create(session: Session, user: Principal, body: WorkflowIn) -> dict[str, Any]:
    check_dsl(body.dsl)
    wf = Workflow(id=new_id("wf"), user_id=user.id, name=body.name, dsl=body.dsl)
    session.add(wf)
    return {**view(wf), "version": versions.record(session, wf, user, body.layout), "layout": body.layout}


def update(session: Session, user: Principal, workflow_id: str, body: WorkflowIn) -> dict[str, Any]:
    wf = load_owned(session, user, workflow_id)
    check_dsl(body.dsl)
    wf.name, wf.dsl, wf.updated_at = body.name, body.dsl, now()
    session.add(wf)
    return {**view(wf), "version": versions.record(session, wf, user, body.layout), "layout": body.layout}


def delete(session: Session, user: Principal, workflow_id: str) -> None:
    session.delete(load_owned(session, user, workflow_id))
    versions.delete_all(session, workflow_id)


def get(session: Session, user: Principal, workflow_id: str) -> dict[str, Any]:
    wf = load_owned(session, user, workflow_id)
    last = versions.latest(session, wf.id)
    return {**view(wf), "version": last.version if last else None, "layout": last.layout if last else None}


def list_versions(session: Session, user: Principal, workflow_id: str) -> dict[str, Any]:
    return {"items": versions.list_versions(session, load_owned(session, user, workflow_id).id)}


def get_version(session: Session, user: Principal, workflow_id: str, number: int) -> dict[str, Any]:
    return versions.get_version(session, load_owned(session, user, workflow_id).id, number)


def list_page(session: Session, user: Principal, limit: int, cursor: str | None) -> Page:
    query = select(Workflow).order_by(col(Workflow.id).desc()).limit(limit + 1)
    if not user.is_admin:
        query = query.where(Workflow.user_id == user.id)
    if cursor:
        query = query.where(col(Workflow.id) < decode_cursor(cursor))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(items=[view(w, with_dsl=False) for w in rows], next_cursor=encode_cursor(rows[-1].id) if more else None)
