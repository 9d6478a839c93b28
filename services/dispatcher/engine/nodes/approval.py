"""`approval`: with a decision for this node, its output is the decision; without one the node
waits (the runner parks the task). Reject/timeout end the task `rejected` (runner)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from services.dispatcher.engine.context import NodeContext, NodeError


@dataclass(frozen=True)
class Waiting:
    """A node waiting for a person: an approval node, or an agent whose high-risk tool call
    (`call_id`, `tool`, `args` as the model wrote them) needs an approval."""

    message: str
    plan: list[Any] | None = None  # an approval node's `plan`: the steps to decide on
    call_id: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None


async def run(ctx: NodeContext) -> Any:
    decision = ctx.shared.decisions.get(ctx.node.id)
    if decision is None:
        plan = ctx.evaluate("config.plan") if ctx.node.config.plan is not None else None
        return Waiting(ctx.render("config.message"), plan=_steps(ctx.node.id, plan) if plan is not None else None)
    return decision


def _steps(node_id: str, value: Any) -> list[Any]:
    """The `plan` value as a list of steps (its JSON text is accepted too)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            value = [value]
    if isinstance(value, dict) and isinstance(value.get("steps"), list):
        value = value["steps"]
    if not isinstance(value, list):
        raise NodeError("template", f"node {node_id!r}: `plan` must give a list of steps")
    return value
