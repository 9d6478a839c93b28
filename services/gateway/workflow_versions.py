"""Versions of a saved workflow: every create or update records the DSL and the canvas layout
as saved, numbered from 1. Restoring one is saving it again (a new version), so the history only
grows and nothing a person saved is lost."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, func, select

from services.gateway.access.principal import Principal
from services.gateway.problems import ApiProblem
from services.gateway.tables import Workflow, WorkflowVersion, aware


def record(session: Session, wf: Workflow, user: Principal, layout: dict[str, Any] | None) -> int:
    """Add the workflow as it is now as its next version; returns the version number."""
    last = session.exec(select(func.max(WorkflowVersion.version)).where(WorkflowVersion.workflow_id == wf.id)).one()
    number = (last or 0) + 1
    session.add(WorkflowVersion(workflow_id=wf.id, version=number, name=wf.name, dsl=wf.dsl, layout=layout,
                                created_by=user.id))
    return number


def latest(session: Session, workflow_id: str) -> WorkflowVersion | None:
    query = (select(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow_id)
             .order_by(col(WorkflowVersion.version).desc()).limit(1))
    return session.exec(query).first()


def _view(v: WorkflowVersion, with_dsl: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": v.version,
        "name": v.name,
        "created_by": v.created_by,
        "created_at": aware(v.created_at),
        "nodes": len((v.dsl or {}).get("nodes") or []),
    }
    if with_dsl:
        out["dsl"] = v.dsl
        out["layout"] = v.layout
    return out


def list_versions(session: Session, workflow_id: str) -> list[dict[str, Any]]:
    """Every version, newest first (without their documents)."""
    query = (select(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow_id)
             .order_by(col(WorkflowVersion.version).desc()))
    return [_view(v, with_dsl=False) for v in session.exec(query)]


def get_version(session: Session, workflow_id: str, number: int) -> dict[str, Any]:
    query = select(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow_id,
                                          WorkflowVersion.version == number)
    found = session.exec(query).first()
    if found is None:
        raise ApiProblem(404, "Not Found", f"Workflow {workflow_id!r} has no version {number}.")
    return _view(found, with_dsl=True)


def delete_all(session: Session, workflow_id: str) -> None:
    for v in session.exec(select(WorkflowVersion).where(WorkflowVersion.workflow_id == workflow_id)):
        session.delete(v)
