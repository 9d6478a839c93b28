"""`agent`: one LLM turn loop (ReAct through the agent runner when the node has tools); with
`evaluate`, the answer is evaluated and regenerated once if poor."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.context import NodeContext, run_agent_body


async def run(ctx: NodeContext) -> Any:
    return await run_agent_body(ctx, ctx.node.config, "config", evaluate=ctx.node.config.evaluate)
