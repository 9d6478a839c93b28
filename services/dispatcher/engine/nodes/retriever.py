"""`retriever`: knowledge-base search through the `kb_search` tool."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.compile import KB_SEARCH
from services.dispatcher.engine.context import NodeContext, NodeError
from services.dispatcher.engine.nodes.tool import call_tool


async def run(ctx: NodeContext) -> Any:
    config = ctx.node.config
    args = {"kb": ctx.render("config.kb"), "query": ctx.render("config.query"), "top_k": config.top_k,
            "mode": config.mode}
    result = await call_tool(ctx, KB_SEARCH, args, timeout_s=config.timeout_s)
    if not isinstance(result, dict) or not isinstance(result.get("chunks"), list):
        raise NodeError("bad_output", f"node {ctx.node.id!r}: kb_search did not return {{chunks: [...]}}")
    return result
