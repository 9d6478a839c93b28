"""`map`: the body node (agent or tool) once per item, bounded in parallel. Each item ends as
`{ok, value}` or `{ok: false, error}`; fewer than `min_success` successes fail the node with
every item's error. A budget overrun or cancellation stops all items at once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from services.dispatcher.engine.context import NodeContext, NodeError
from services.dispatcher.engine.gather import gather_all
from services.dispatcher.engine.nodes.agent import run_agent_body
from services.dispatcher.engine.nodes.tool import run_tool_body
from services.dispatcher.llm.api import BudgetExceeded, LLMError
from shared.contract.dsl import MapAgentBody

BODY = "config.node.config"
MAX_ITEMS = 10_000


async def run(ctx: NodeContext) -> list[dict[str, Any]]:
    config = ctx.node.config
    items = ctx.evaluate("config.items")
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise NodeError("bad_items", f"node {ctx.node.id!r}: items is {type(items).__name__}, not a list")
    if len(items) > MAX_ITEMS:
        raise NodeError("bad_items", f"node {ctx.node.id!r}: {len(items)} items; the limit is {MAX_ITEMS}")
    gate = asyncio.Semaphore(config.concurrency)
    body = config.node

    async def one(index: int, item: Any) -> dict[str, Any]:
        extra = {"item": item, "index": index}
        async with gate:
            try:
                async with asyncio.timeout(body.config.timeout_s):
                    if isinstance(body, MapAgentBody):
                        value = await run_agent_body(ctx, body.config, BODY, extra, stream=False)
                    else:
                        value = await run_tool_body(ctx, body.config, BODY, extra)
                return {"ok": True, "value": value}
            except (BudgetExceeded, asyncio.CancelledError):
                raise
            except TimeoutError:
                return {"ok": False, "error": f"item {index} timed out after {body.config.timeout_s}s"}
            except (NodeError, LLMError) as exc:
                return {"ok": False, "error": exc.message}
            except Exception as exc:
                return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    results = await gather_all([one(i, item) for i, item in enumerate(items)])
    succeeded = sum(1 for r in results if r["ok"])
    if succeeded < config.min_success:
        errors = "; ".join(f"[{i}] {r['error']}" for i, r in enumerate(results) if not r["ok"])
        raise NodeError("map_failed", f"node {ctx.node.id!r}: {succeeded} of {len(results)} items succeeded, "
                        f"{config.min_success} required. Errors: {errors or 'none'}")
    return results
