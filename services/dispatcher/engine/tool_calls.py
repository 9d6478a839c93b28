"""The one road of a tool call, for `tool`/`retriever` nodes and for the tools a ReAct agent calls.

`execute_tool` emits `tool.call`, calls the tool over NATS through the task's ToolCaller, times it,
emits `tool.result` (a preview, and the result itself when it is small enough), and returns the
reply. It redacts nothing: every event of a task passes the
task's `RedactingEvents` sink on its way out, which is the one place redaction happens.

Runtime values (`user_id`, `session_id`, `kb`…) a tool names in its `inject` list are added to the
arguments by `inject`, overriding whatever the arguments held for them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from services.dispatcher.engine.preview import preview
from services.dispatcher.llm.api import EventEmit, ToolCaller
from shared.contract.events import RESULT_CHARS, ToolCallEvent, ToolResultEvent
from shared.contract.tools import ToolMeta, ToolReply


def inject(args: dict[str, Any], names: Iterable[str], values: Mapping[str, Any]) -> dict[str, Any]:
    """`args` with each runtime value of `names` set (in place; a value that is None is not set)."""
    for name in names:
        value = values.get(name)
        if value is not None:
            args[name] = value
    return args


def _whole(result: Any) -> Any:
    """The result itself for the `tool.result` event, when it is small enough to carry whole."""
    if result is None:
        return None
    size = len(json.dumps(result, ensure_ascii=False, default=str))
    return result if size <= RESULT_CHARS else None


def reply_error(reply: ToolReply) -> str:
    """A failed reply as one line: `<code>: <message>`."""
    error = reply.error
    return f"{error.code}: {error.message}" if error else "unknown tool error"


async def execute_tool(caller: ToolCaller, emit: EventEmit, meta: ToolMeta, *, call_id: str, tool: str,
                       args: dict[str, Any], shown_args: dict[str, Any] | None = None,
                       timeout_s: float | None = None, refused: ToolReply | None = None) -> ToolReply:
    """One tool call with its `tool.call`/`tool.result` events (task and node from `meta`).

    `shown_args` is what the `tool.call` event shows (default: `args`, as sent); a ReAct agent
    shows the arguments as the model wrote them. A `refused` reply (unknown tool, bad arguments,
    a high-risk tool the node does not allow) is answered without calling anything. An exception
    of the caller propagates (no `tool.result` then): what it means is the caller's decision."""
    task_id = meta.task_id or ""
    await emit(ToolCallEvent(task_id=task_id, node_id=meta.node_id, call_id=call_id, tool=tool,
                             args=args if shown_args is None else shown_args))
    started = time.perf_counter()
    reply = refused if refused is not None else await caller.call(tool, args, meta, timeout_s=timeout_s)
    duration = round((time.perf_counter() - started) * 1000, 3)
    if reply.ok:
        await emit(ToolResultEvent(task_id=task_id, node_id=meta.node_id, call_id=call_id, ok=True,
                                   duration_ms=duration, result_preview=preview(reply.result),
                                   result=_whole(reply.result)))
    else:
        await emit(ToolResultEvent(task_id=task_id, node_id=meta.node_id, call_id=call_id, ok=False,
                                   duration_ms=duration, error=reply_error(reply)))
    return reply
