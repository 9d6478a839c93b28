"""The audit log: one row per mutating request (who, route, target, outcome, request id).
Bodies are never recorded, so secrets sent to the API never reach this table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, or_
from sqlmodel import Session, col, select

from services.gateway.db import Database, insert_row
from services.gateway.pagination import Page, decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from services.gateway.tables import AuditEntry, GuardrailEventRow, aware, now

# sqlmodel does not declare `__table__`
AUDIT_LOG: Table = AuditEntry.__table__  # type: ignore[attr-defined]
GUARDRAIL_EVENTS: Table = GuardrailEventRow.__table__  # type: ignore[attr-defined]


def outcome_of(status: int) -> str:
    if status < 400:
        return "ok"
    if status in (401, 403, 429):
        return "denied"
    if status < 500:
        return "rejected"
    return "error"


async def write_audit(db: Database, *, wait: bool = True, **fields: Any) -> None:
    """Returns once the row is committed (in the transaction of concurrent requests' writes), or
    at once without `wait` (the row goes with the next group). `fields` are `AuditEntry`'s columns."""
    values = {"ts": now(), **fields}
    if wait:
        await db.run_grouped(insert_row, AUDIT_LOG, values)
    else:
        db.run_later(insert_row, AUDIT_LOG, values)


async def write_guardrail_event(db: Database, **fields: Any) -> None:
    """`fields` are `GuardrailEventRow`'s columns (the model gives the others their defaults)."""
    await db.run_grouped(insert_row, GUARDRAIL_EVENTS, GuardrailEventRow(**fields).model_dump(exclude={"id"}))


@dataclass(frozen=True)
class AuditFilter:
    """Server-side filters of `GET /admin/audit` (all optional, combined with AND).
    `user_id` and `route` are case-insensitive substrings, as the console's boxes mean them:
    `route` matches the route template or the target; `q` also searches user and request id."""

    user_id: str | None = None
    method: str | None = None
    outcome: str | None = None
    route: str | None = None
    q: str | None = None

    def clauses(self) -> list[Any]:
        t = AuditEntry
        out: list[Any] = []
        if self.user_id:
            out.append(col(t.user_id).icontains(self.user_id, autoescape=True))
        if self.method:
            out.append(col(t.method) == self.method.upper())
        if self.outcome:
            out.append(col(t.outcome) == self.outcome)
        if self.route:
            out.append(_any_contains(self.route, t.route, t.target))
        if self.q:
            out.append(_any_contains(self.q, t.route, t.target, t.user_id, t.request_id))
        return out


@dataclass(frozen=True)
class GuardrailFilter:
    """Server-side filters of `GET /admin/guardrail-events`; `q` is a case-insensitive substring
    of the rule, reason, route or task id."""

    action: str | None = None
    tier: int | None = None
    user_id: str | None = None
    q: str | None = None

    def clauses(self) -> list[Any]:
        t = GuardrailEventRow
        out: list[Any] = []
        if self.action:
            out.append(col(t.action) == self.action)
        if self.tier is not None:
            out.append(col(t.tier) == self.tier)
        if self.user_id:
            out.append(col(t.user_id).icontains(self.user_id, autoescape=True))
        if self.q:
            out.append(_any_contains(self.q, t.rule, t.reason, t.route, t.task_id))
        return out


def _any_contains(text: str, *columns: Any) -> Any:
    # autoescape: `%` and `_` typed by the admin are literal characters, not wildcards.
    return or_(*(col(c).icontains(text, autoescape=True) for c in columns))


def _page_by_id(session: Session, model: Any, limit: int, cursor: str | None, clauses: list[Any]) -> Page:
    query = select(model).where(*clauses).order_by(col(model.id).desc()).limit(limit + 1)
    if cursor:
        query = query.where(col(model.id) < _cursor_id(cursor))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    items = [_row_dict(r) for r in rows]
    return Page(items=items, next_cursor=encode_cursor(str(rows[-1].id)) if more and rows else None)


def _cursor_id(cursor: str) -> int:
    try:
        return int(decode_cursor(cursor))
    except ValueError as exc:  # a cursor of another list (task ids are not numbers)
        raise ApiProblem(400, "Bad Request", "The cursor is not valid.") from exc


def _row_dict(row: Any) -> dict[str, Any]:
    data = row.model_dump()
    data["ts"] = aware(data["ts"])
    return data


def list_audit(session: Session, limit: int, cursor: str | None, where: AuditFilter | None = None) -> Page:
    """Newest first; the cursor (the last id seen) stays valid under the same filters."""
    return _page_by_id(session, AuditEntry, limit, cursor, (where or AuditFilter()).clauses())


def list_guardrail_events(
    session: Session, limit: int, cursor: str | None, where: GuardrailFilter | None = None
) -> Page:
    return _page_by_id(session, GuardrailEventRow, limit, cursor, (where or GuardrailFilter()).clauses())
