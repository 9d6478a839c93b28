"""`output`: names a value of the task result (keyed by this node's id)."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.context import NodeContext


async def run(ctx: NodeContext) -> Any:
    value = ctx.node.config.value
    if isinstance(value, str):
        # A value that is exactly one `{{ expression }}` giving a list or a plain object stays
        # JSON (its text would be a Python repr); everything else is text as before — a
        # retriever's output, a dict subclass, still reads as its chunks.
        native = ctx.evaluate("config.value")
        if type(native) in (list, dict):
            return native
        return ctx.render("config.value")
    return ctx.render_tree(value, "config.value")
