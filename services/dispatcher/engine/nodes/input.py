"""`input`: the task's input enters here, checked against `schema` when one is given (jsonschema,
~5 MB resident, is imported with the first schema to check, as in the gateway's validation)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.dispatcher.engine.context import NodeContext, NodeError

if TYPE_CHECKING:
    from jsonschema import ValidationError


async def run(ctx: NodeContext) -> Any:
    schema = ctx.node.config.schema_
    value = ctx.task.input
    if schema is not None:
        from jsonschema.validators import validator_for

        validator = validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            raise NodeError("bad_input", "the task input does not match the schema: " + "; ".join(
                _describe(e) for e in errors[:10]))
    return value


def _describe(error: ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"
