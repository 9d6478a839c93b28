"""One module per node kind; each exposes `async def run(ctx) -> output`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from services.dispatcher.engine.context import NodeContext
from services.dispatcher.engine.nodes import (
    agent,
    approval,
    branch,
    coordinator,
    dual,
    input,
    map,
    output,
    retriever,
    tool,
)

Handler = Callable[[NodeContext], Awaitable[Any]]

HANDLERS: dict[str, Handler] = {
    "input": input.run,
    "retriever": retriever.run,
    "agent": agent.run,
    "tool": tool.run,
    "branch": branch.run,
    "map": map.run,
    "coordinator": coordinator.run,
    "dual": dual.run,
    "approval": approval.run,
    "output": output.run,
}
