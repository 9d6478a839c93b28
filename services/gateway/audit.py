"""The audit log: one row per mutating request (who, route, target, outcome, request id).
Bodies are never recorded, so secrets sent to the API never reach this table."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from services.gateway.db import Database
from services.gateway.pagination import Page, decode_cursor, encode_cursor
from services.gateway.tables import AuditEntry, GuardrailEventRow, aware


def outcome_of(status: int) -> str:
    if status < 400:
        return "ok"
    if status in (401, 403, 429):
        return "denied"
    if status < 500:
        return "rejected"
    return "error"


def _insert(session: Session, row: AuditEntry | GuardrailEventRow) -> None:
    session.add(row)


async def write_audit(db: Database, **fields: Any) -> None:
    await db.run(_insert, AuditEntry(**fields))


async def write_guardrail_event(db: Database, **fields: Any) -> None:
    await db.run(_insert, GuardrailEventRow(**fields))


def _page_by_id(session: Session, model: Any, limit: int, cursor: str | None) -> Page:
    query = select(model).order_by(col(model.id).desc()).limit(limit + 1)
    if cursor:
        query = query.where(col(model.id) < int(decode_cursor(cursor)))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    items = [_row_dict(r) for r in rows]
    return Page(items=items, next_cursor=encode_cursor(str(rows[-1].id)) if more and rows else None)


def _row_dict(row: Any) -> dict[str, Any]:
    data = row.model_dump()
    data["ts"] = aware(data["ts"])
    return data


def list_audit(session: Session, limit: int, cursor: str | None) -> Page:
    return _page_by_id(session, AuditEntry, limit, cursor)


def list_guardrail_events(session: Session, limit: int, cursor: str | None) -> Page:
    return _page_by_id(session, GuardrailEventRow, limit, cursor)
