"""How `/lg` refuses what it does not support, in one form: inside a request model, a field
validator raising `unsupported(field, why)` (pydantic makes it a 422 naming the field); outside
one, the `refused` problem. `refuse_when_set` is the validator of a field
that is accepted only when it asks for nothing (absent, null, empty)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationInfo, field_validator

from services.gateway.problems import ApiProblem


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
