"""How `/lg` answers with JSON (`json_response`: dates and models encoded as FastAPI does), and one
page of a search answered from a list the gateway has built (assistants, crons): sorted by a field
when asked (missing values last), else in the list's own order or its reverse, cut at
`offset`/`limit`, each item narrowed to the `select`ed fields, the next offset in
`X-Pagination-Next` as the SDK reads it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse


def page_of(found: list[dict[str, Any]], *, sort_by: str | None, sort_order: str | None, offset: int, limit: int,
            select: Sequence[str] | None) -> tuple[list[dict[str, Any]], int | None]:  # fmt: skip
    """The page and the next offset (None: this is the last page)."""
    if sort_by is not None:
        found = sorted(found, key=lambda item: (item[sort_by] is None, str(item[sort_by] or "")),
                       reverse=sort_order != "asc")  # fmt: skip
    elif sort_order == "asc":
        found = found[::-1]
    page = found[offset:offset + limit]
    if select:
        page = [{k: item[k] for k in select} for item in page]
    return page, (offset + limit if len(found) > offset + limit else None)


def json_response(body: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(jsonable_encoder(body), headers=headers)


def page_response(page: list[dict[str, Any]], next_offset: int | None) -> JSONResponse:
    return json_response(page, headers={"X-Pagination-Next": str(next_offset)} if next_offset is not None else None)
