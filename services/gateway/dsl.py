"""DSL validation at the gateway: shared.contract.validate, answered as problem details."""

from __future__ import annotations

from typing import Any

from services.gateway.problems import ApiProblem
from shared.contract.validate import Problem, ValidationResult, validate_dsl


def problem_items(problems: list[Problem]) -> list[dict[str, Any]]:
    return [p.model_dump(exclude_none=True) for p in problems]


def check_dsl(dsl: Any) -> ValidationResult:
    """Validate; raise a 422 problem listing every error."""
    result = validate_dsl(dsl)
    if not result.ok:
        count = len(result.errors)
        raise ApiProblem(
            422,
            "Invalid workflow",
            f"The workflow has {count} problem{'s' if count != 1 else ''}: "
            + "; ".join(e.message for e in result.errors[:3])
            + (" …" if count > 3 else ""),
            errors=problem_items(result.errors),
        )
    return result
