"""Cursor pagination (API.md): `limit` ≤ 200 (default 50) and an opaque `cursor`."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Query
from pydantic import BaseModel
from sqlmodel import Session, SQLModel, col, select

from services.gateway.problems import ApiProblem

MAX_LIMIT = 200

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="page size (≤ 200)")]
Cursor = Annotated[str | None, Query(max_length=512, description="opaque cursor from `next_cursor`")]


class Page(BaseModel):
    items: list[Any]
    next_cursor: str | None = None


_MARK = "c1:"


def encode_cursor(value: str) -> str:
    return base64.urlsafe_b64encode((_MARK + value).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ApiProblem(400, "Bad Request", "The cursor is not valid.") from exc
    if not raw.startswith(_MARK):
        raise ApiProblem(400, "Bad Request", "The cursor is not valid.")
    return raw[len(_MARK) :]


# The largest row offset a list takes: a larger one is a 422, not a number the database driver
# cannot bind (a 500).
MAX_OFFSET = 2**31 - 1

Row = TypeVar("Row", bound=SQLModel)


def keyed_page(session: Session, model: type[Row], key: str, limit: int, cursor: str | None,
               view: Callable[[Row], Any]) -> Page:
    """Rows of `model` in the order of their unique string column `key`, a page at a time: the
    cursor is the last key of the page before (so a row added meanwhile is neither skipped nor
    repeated)."""
    column = col(getattr(model, key))
    query = select(model).order_by(column).limit(limit + 1)
    if cursor:
        query = query.where(column > decode_cursor(cursor))
    rows = list(session.exec(query))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(items=[view(row) for row in rows], next_cursor=encode_cursor(getattr(rows[-1], key)) if more else None)
