"""`output`: names a value of the task result (keyed by this node's id)."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.context import NodeContext


async def run(ctx: NodeContext) -> Any:
    return ctx.render_tree(ctx.node.config.value, "config.value")
