"""How `/lg` refuses what it does not support, in one form: inside a request model, a field
validator raising `unsupported(field, why)` (pydantic makes it a 422 naming the field); outside
one, the `refused` problem. `refuse_when_set` is the validator of a field
that is accepted only when it asks for nothing (absent, null, empty). `known_query`, a dependency
of every `/lg` route, refuses a query parameter the route does not read (FastAPI would ignore it)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import ValidationInfo, field_validator

from services.gateway.problems import ApiProblem
from services.gateway.routing import query_read, query_unread


def unsupported(field: str, why: str) -> ValueError:
    return ValueError(f"`{field}` is not supported: {why}")


def refuse_when_set(*fields: str, why: str) -> Any:
    """A field validator for a request model (assign it to a class attribute): a value of `fields`
    that asks for something is refused with `why`; one that asks for nothing becomes None."""

    def check(cls: type, value: Any, info: ValidationInfo) -> None:
        if value:
            raise unsupported(info.field_name or fields[0], why)
        return None

    return field_validator(*fields)(classmethod(check))


def refused(field: str, why: str) -> ApiProblem:
    """A request refused outside its model (a value the route checks against what is stored)."""
    return ApiProblem(422, "Invalid request", f"{field}: {why}.",
                      errors=[{"code": "unsupported", "field": field, "message": why}])


async def known_query(request: Request) -> None:
    """A query parameter the route does not read is a 422 naming it, as an unknown body field is."""
    unknown = query_unread(request)
    if unknown is not None:
        reads = ", ".join(f"`{name}`" for name in sorted(query_read(request))) or "none"
        raise refused(unknown, f"not a query parameter of this route (those it reads: {reads})")
