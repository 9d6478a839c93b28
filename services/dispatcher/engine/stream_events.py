"""A model call's stream as a node's events: `token`, reasoning as `thinking.start` /
`thinking.delta` / `thinking.end` around each block, and `tool.input` (the arguments of a tool
call while the model writes them)."""

from __future__ import annotations

from collections.abc import Mapping

from services.dispatcher.llm.api import Delta, EventEmit
from shared.contract.events import (
    ThinkingEndEvent,
    ThinkingEvent,
    ThinkingStartEvent,
    TokenEvent,
    ToolInputEvent,
)


class StreamEvents:
    """`delta` is the call's `on_delta` sink; `end()` after the call (however it ended) closes a
    reasoning block still open. `tool_names` maps a model's function names back to tool names."""

    def __init__(self, emit: EventEmit, task_id: str, node_id: str, model: str | None = None,
                 tool_names: Mapping[str, str] | None = None) -> None:
        self._emit = emit
        self._task_id = task_id
        self._node_id = node_id
        self._model = model
        self._tool_names = tool_names or {}
        self._thinking = False

    async def delta(self, delta: Delta) -> None:
        task_id, node_id = self._task_id, self._node_id
        if delta.kind == "thinking":
            if not self._thinking:
                self._thinking = True
                await self._emit(ThinkingStartEvent(task_id=task_id, node_id=node_id))
            await self._emit(ThinkingEvent(task_id=task_id, node_id=node_id, text=delta.text))
            return
        await self.end()
        if delta.kind == "token":
            await self._emit(TokenEvent(task_id=task_id, node_id=node_id, text=delta.text,
                                        model=delta.model or self._model))
        else:
            function = delta.tool or ""
            await self._emit(ToolInputEvent(task_id=task_id, node_id=node_id, call_id=delta.call_id or "",
                                            tool=self._tool_names.get(function, function), delta=delta.text))

    async def end(self) -> None:
        if self._thinking:
            self._thinking = False
            await self._emit(ThinkingEndEvent(task_id=self._task_id, node_id=self._node_id))
