"""`tool`: one direct tool call; string args are templates."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.context import NodeContext, run_tool_body


async def run(ctx: NodeContext) -> Any:
    return await run_tool_body(ctx, ctx.node.config, "config")
