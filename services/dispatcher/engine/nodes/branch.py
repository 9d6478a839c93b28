"""`branch`: picks a handle (`condition` → true/false, or the first matching case, else default).
Routing on the handle is the runner's job."""

from __future__ import annotations

from services.dispatcher.engine.context import NodeContext
from shared.contract.events import BranchEvent


async def run(ctx: NodeContext) -> str:
    config = ctx.node.config
    if config.condition is not None:
        handle = "true" if ctx.evaluate("config.condition") else "false"
    else:
        handle = "default"
        for index, case in enumerate(config.cases):
            if ctx.evaluate(f"config.cases[{index}].when"):
                handle = case.handle
                break
    await ctx.emit(BranchEvent(task_id=ctx.task.task_id, handle=handle))
    return handle
