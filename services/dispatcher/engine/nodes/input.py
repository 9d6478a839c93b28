"""`input`: the task's input enters here, checked against `schema` when one is given."""

from __future__ import annotations

from typing import Any

from jsonschema import ValidationError
from jsonschema.validators import validator_for

from services.dispatcher.engine.context import NodeContext, NodeError


async def run(ctx: NodeContext) -> Any:
    schema = ctx.node.config.schema_
    value = ctx.task.input
    if schema is not None:
        validator = validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            raise NodeError("bad_input", "the task input does not match the schema: " + "; ".join(
                _describe(e) for e in errors[:10]))
    return value


def _describe(error: ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"
