"""`approval`: with a decision for this node, its output is the decision; without one the node
waits (the runner parks the task). Reject/timeout end the task `rejected` (runner)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.dispatcher.engine.context import NodeContext


@dataclass(frozen=True)
class Waiting:
    message: str


async def run(ctx: NodeContext) -> Any:
    decision = ctx.shared.decisions.get(ctx.node.id)
    if decision is None:
        return Waiting(ctx.render("config.message"))
    return decision
