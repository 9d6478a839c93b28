"""`tool`: one direct tool call; string args are templates. A map body with a tool config and a
`retriever` (`kb_search`) call tools the same way: through the one tool executor."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from services.dispatcher.engine.context import NodeContext, NodeError
from services.dispatcher.engine.tool_calls import execute_tool, inject, reply_error
from shared.contract.dsl import ToolConfig

_CALL_IDS = itertools.count(1)  # call ids need only be unique within a task's trace


async def run(ctx: NodeContext) -> Any:
    return await run_tool_body(ctx, ctx.node.config, "config")


async def run_tool_body(ctx: NodeContext, config: ToolConfig, prefix: str,
                        extra: Mapping[str, Any] | None = None) -> Any:
    args = ctx.render_tree(config.args, f"{prefix}.args", extra)
    return await call_tool(ctx, config.tool, args, timeout_s=config.timeout_s)


async def call_tool(ctx: NodeContext, tool: str, args: dict[str, Any], timeout_s: float | None = None) -> Any:
    """A direct call: runtime values are injected (and shown in `tool.call`); the result, or
    NodeError `tool_error` when the tool answers with an error."""
    descriptor = (await ctx.shared.tool_registry()).get(tool)
    if descriptor is not None:
        inject(args, descriptor.inject, ctx.inject_values())
    reply = await execute_tool(ctx.shared.deps.tools, ctx.emit, ctx.meta, call_id=f"{ctx.node.id}.{next(_CALL_IDS)}",
                               tool=tool, args=args, timeout_s=timeout_s)
    if reply.ok:
        return reply.result
    raise NodeError("tool_error", f"node {ctx.node.id!r}: tool {tool!r} failed: {reply_error(reply)}")
