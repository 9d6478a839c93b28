"""DSL validation at the gateway: shared.contract.validate, answered as problem details."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from services.gateway.problems import ApiProblem
from shared.contract.validate import Problem, document_key, validate_dsl

# The warnings of the documents found valid lately, by `document_key`: a canvas or a client
# submits the same workflow again and again, and validating it (every node's templates
# compiled) cost more than the rest of building its task row.
VALID_CACHE_SIZE = 256
_valid: OrderedDict[bytes, list[Problem]] = OrderedDict()


def problem_items(problems: list[Problem]) -> list[dict[str, Any]]:
    return [p.model_dump(exclude_none=True) for p in problems]


def check_dsl(dsl: Any) -> list[Problem]:
    """Validate; raise a 422 problem listing every error. Returns the warnings."""
    key = document_key(dsl)
    if key is not None and (warnings := _valid.get(key)) is not None:
        _valid.move_to_end(key)
        return warnings
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
    if key is not None:
        _valid[key] = result.warnings
        while len(_valid) > VALID_CACHE_SIZE:
            _valid.popitem(last=False)
    return result.warnings


def check_input(dsl: dict[str, Any], task_input: dict[str, Any]) -> None:
    """Check the task input against the input node's `schema` before anything is queued, so a
    missing field is a 422 naming it rather than a task that fails later (the dispatcher checks
    again, as `bad_input`). Call after `check_dsl`: the schema itself is valid by then."""
    from jsonschema.validators import validator_for

    node = next((n for n in dsl.get("nodes", []) if isinstance(n, dict) and n.get("kind") == "input"), None)
    schema = (node.get("config") or {}).get("schema") if node else None
    if node is None or not isinstance(schema, dict):
        return
    found = sorted(validator_for(schema)(schema).iter_errors(task_input), key=lambda e: list(e.absolute_path))
    if not found:
        return
    errors = [
        Problem(code="bad_input", message=err.message, node_id=node["id"],
                field="/".join(["input", *(str(p) for p in err.absolute_path)]))
        for err in found[:20]
    ]
    raise ApiProblem(
        422,
        "Invalid input",
        "The task input does not match the workflow's input schema: " + "; ".join(e.message for e in errors[:3])
        + (" …" if len(errors) > 3 else ""),
        errors=problem_items(errors),
    )
