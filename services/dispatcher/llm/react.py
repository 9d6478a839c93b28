"""ReAct for `agent` nodes with tools: the model calls tools (several in parallel), sees the
results, and continues, up to `max_steps` model turns with tools; then one last turn without
tools forces an answer.

Runtime values (`user_id`, `session_id`, `kb`…) named in a tool's `inject` list are removed from
the schema the model sees and added to the arguments by us, overriding anything the model
wrote there. High-risk tools are refused unless the node allows them.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import replace
from typing import Any

from services.dispatcher.harness.redact import Redactor
from services.dispatcher.llm.api import (
    LLM,
    AgentTurn,
    Delta,
    EventEmit,
    LLMResult,
    TokenBudget,
    ToolCaller,
    ToolCallRequest,
)
from shared.contract.events import ThinkingEvent, TokenEvent, ToolCallEvent, ToolResultEvent
from shared.contract.models import Usage
from shared.contract.tools import ToolDescriptor, ToolReply

MAX_RESULT_CHARS = 16_000  # what one tool result may add to the conversation
PREVIEW_CHARS = 300
FINAL_NUDGE = (
    "You have used all the tool calls allowed for this task. Answer now with what you have; do not call tools."
)


def function_spec(tool: ToolDescriptor) -> dict[str, Any]:
    """An OpenAI function spec from a descriptor, without the injected parameters."""
    schema = copy.deepcopy(tool.input_schema) or {"type": "object", "properties": {}}
    schema.pop("title", None)
    props = schema.get("properties")
    if isinstance(props, dict):
        for name in tool.inject:
            props.pop(name, None)
    if isinstance(schema.get("required"), list):
        schema["required"] = [r for r in schema["required"] if r not in tool.inject]
        if not schema["required"]:
            schema.pop("required")
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or tool.title, "parameters": schema},
    }


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


def _tool_content(reply: ToolReply) -> str:
    if reply.ok:
        text = json.dumps({"ok": True, "result": reply.result}, ensure_ascii=False, default=str)
    else:
        err = reply.error
        text = json.dumps(
            {
                "ok": False,
                "error": {"code": err.code if err else "error", "message": err.message if err else "tool failed"},
            }
        )
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + "… [truncated]"
    return text


def _redact_values(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, dict):
        return {k: _redact_values(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_values(v, redactor) for v in value]
    return value


class ReactAgent:
    """Implements `AgentRunner`. `tool_timeout_s` bounds each tool call. Tool arguments and
    result previews in events pass the redactor too (a model may echo a secret into a call)."""

    def __init__(self, tool_timeout_s: float | None = None, redactor: Redactor | None = None) -> None:
        self.tool_timeout_s = tool_timeout_s
        self.redactor = redactor or Redactor()

    async def __call__(
        self, llm: LLM, turn: AgentTurn, *, caller: ToolCaller, emit: EventEmit, budget: TokenBudget | None
    ) -> LLMResult:
        task_id = turn.meta.task_id or ""
        tools = {t.name: t for t in turn.tools}
        specs = [function_spec(t) for t in turn.tools]
        messages = list(turn.request.messages)
        usage = Usage()

        async def on_delta(delta: Delta) -> None:
            if delta.kind == "token":
                await emit(TokenEvent(task_id=task_id, node_id=turn.node_id, text=delta.text, model=delta.model))
            else:
                await emit(ThinkingEvent(task_id=task_id, node_id=turn.node_id, text=delta.text))

        steps = 0
        while True:
            offer_tools = bool(specs) and steps < turn.max_steps
            if not offer_tools and steps > 0:
                messages.append({"role": "user", "content": FINAL_NUDGE})
            request = replace(turn.request, messages=messages, tools=specs if offer_tools else None)
            result = await llm.complete(request, budget=budget, on_delta=on_delta)
            usage = usage.add(result.usage)
            if not result.tool_calls or not offer_tools:
                result.usage = usage
                return result
            steps += 1
            messages.append(
                {
                    "role": "assistant",
                    "content": result.text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
                        }
                        for c in result.tool_calls
                    ],
                }
            )
            replies = await asyncio.gather(
                *[self._run_tool(call, tools, turn, caller, emit, task_id) for call in result.tool_calls]
            )
            for call, reply in zip(result.tool_calls, replies, strict=True):
                messages.append({"role": "tool", "tool_call_id": call.id, "content": _tool_content(reply)})

    async def _run_tool(
        self,
        call: ToolCallRequest,
        tools: dict[str, ToolDescriptor],
        turn: AgentTurn,
        caller: ToolCaller,
        emit: EventEmit,
        task_id: str,
    ) -> ToolReply:
        # The event shows the arguments as the model wrote them: never the injected values.
        await emit(
            ToolCallEvent(
                task_id=task_id,
                node_id=turn.node_id,
                call_id=call.id,
                tool=call.name,
                args=_redact_values(call.arguments, self.redactor),
            )
        )
        started = time.perf_counter()
        reply = await self._execute(call, tools, turn, caller)
        await emit(
            ToolResultEvent(
                task_id=task_id,
                node_id=turn.node_id,
                call_id=call.id,
                ok=reply.ok,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
                result_preview=self.redactor.redact(_preview(reply.result)) if reply.ok else None,
                error=None if reply.ok or reply.error is None else f"{reply.error.code}: {reply.error.message}",
            )
        )
        return reply

    async def _execute(
        self, call: ToolCallRequest, tools: dict[str, ToolDescriptor], turn: AgentTurn, caller: ToolCaller
    ) -> ToolReply:
        tool = tools.get(call.name)
        if tool is None:
            return ToolReply.failure(
                "unknown_tool",
                f"no tool named {call.name!r} is available here; available: {', '.join(sorted(tools)) or 'none'}",
            )
        if call.arguments_error:
            return ToolReply.failure("bad_arguments", f"{call.name}: {call.arguments_error}")
        if tool.high_risk and not turn.allow_high_risk:
            return ToolReply.failure(
                "approval_required",
                f"tool {call.name!r} is high-risk and needs a human approval; this node does not allow it",
            )
        args = {k: v for k, v in call.arguments.items() if k not in tool.inject}
        for name in tool.inject:
            if name in turn.inject and turn.inject[name] is not None:
                args[name] = turn.inject[name]
        try:
            return await caller.call(call.name, args, turn.meta, timeout_s=self.tool_timeout_s)
        except Exception as exc:  # a tool transport failure is a tool error the model can see
            return ToolReply.failure("tool_failed", f"{call.name} failed: {type(exc).__name__}: {exc}")


run_agent = ReactAgent()
