"""ReAct for `agent` nodes with tools: the model calls tools (several in parallel), sees the
results, and continues, up to `max_steps` model turns with tools; then one last turn without
tools forces an answer.

Runtime values (`user_id`, `session_id`, `kb`…) named in a tool's `inject` list are removed from
the schema the model sees and added to the arguments by us, overriding anything the model
wrote there. A high-risk tool waits for a person's approval (the task parks, see `ReactAgent`);
where the loop cannot park (map bodies, experts) it is refused.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from services.dispatcher.engine.agent_loop import AgentLoop, PendingCall, ToolDecision
from services.dispatcher.engine.stream_events import StreamEvents
from services.dispatcher.engine.streamed import complete_after_prefix
from services.dispatcher.engine.tool_calls import execute_tool, inject
from services.dispatcher.llm.api import (
    LLM,
    AgentTurn,
    DeltaSink,
    EventEmit,
    LLMRequest,
    LLMResult,
    TokenBudget,
    ToolApprovalNeeded,
    ToolCaller,
)
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply

_FUNCTION_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_RESULT_CHARS = 16_000  # what one tool result may add to the conversation
FINAL_NUDGE = (
    "You have used all the tool calls allowed for this task. Answer now with what you have; do not call tools."
)


def function_names(tools: list[ToolDescriptor]) -> dict[str, ToolDescriptor]:
    """The name each tool goes by as a model's function. OpenAI-protocol function names allow only
    letters, digits, `_` and `-`, while tool names may have more (an MCP server's tools are named
    `<server>.<tool>`): others become `_`, and a name already taken gets a numbered suffix."""
    named: dict[str, ToolDescriptor] = {}
    for tool in tools:
        base = _FUNCTION_NAME_UNSAFE.sub("_", tool.name)[:60] or "tool"
        name, n = base, 1
        while name in named:
            n += 1
            name = f"{base}_{n}"
        named[name] = tool
    return named


def function_spec(tool: ToolDescriptor, function_name: str | None = None,
                  defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """An OpenAI function spec from a descriptor (named `function_name`, by default the tool's own
    name), without the injected parameters; a parameter with a default (`tool_defaults`) is
    optional and its description says what it is when left out."""
    schema = tool.public_schema()
    if defaults:
        properties = {**schema.get("properties", {})}
        for name, value in defaults.items():
            if name in properties:
                said = properties[name].get("description")
                shown = json.dumps(value, ensure_ascii=False)
                properties[name] = {**properties[name],
                                    "description": f"{said} (default: {shown})" if said else f"Default: {shown}."}
        schema = {**schema, "properties": properties,
                  "required": [r for r in schema.get("required", []) if r not in defaults]}
    return {
        "type": "function",
        "function": {
            "name": function_name or tool.name,
            "description": tool.description or tool.title,
            "parameters": schema,
        },
    }


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


class ReactAgent:
    """Implements `AgentRunner`. `tool_timeout_s` bounds each tool call. Each call goes through
    the engine's one tool executor; the task's event sink redacts what the events carry (a model
    may echo a secret into a call's arguments).

    With the turn's `keeper`, the loop's state is checkpointed after each model turn that calls
    tools and after each tool result, and a high-risk call parks the node for an approval
    (`ToolApprovalNeeded`): a later run of the node — after the decision, or on another dispatcher
    after a crash — continues from that state."""

    def __init__(self, tool_timeout_s: float | None = None) -> None:
        self.tool_timeout_s = tool_timeout_s

    async def __call__(
        self, llm: LLM, turn: AgentTurn, *, caller: ToolCaller, emit: EventEmit, budget: TokenBudget | None
    ) -> LLMResult:
        task_id = turn.meta.task_id or ""
        client = {str(t["function"]["name"]) for t in turn.client_tools}
        # by the name the model calls it; a caller's tool of the same name hides the agent's own
        tools = {n: t for n, t in function_names(turn.tools).items() if n not in client}
        specs = [function_spec(t, name, turn.defaults.get(t.name)) for name, t in tools.items()]
        specs += turn.client_tools
        keeper = turn.keeper
        kept = keeper.state if keeper is not None else None
        state = kept.model_copy(deep=True) if kept is not None else AgentLoop(messages=list(turn.request.messages))
        stream = StreamEvents(emit, task_id, turn.node_id, tool_names={n: t.name for n, t in tools.items()})

        async def save() -> None:
            if keeper is not None:
                await keeper.save(state)

        async def ask(request: LLMRequest, on_delta: DeltaSink) -> LLMResult:
            return await llm.complete(request, budget=budget, on_delta=on_delta)

        # After a takeover, clients saw the node's text up to where its dispatcher died: the turns
        # kept in the checkpoint, then part of the turn it was in. That part is not streamed again.
        unseen = _cut_off_turn(turn.streamed, state.messages[len(turn.request.messages):])

        while True:
            if state.pending:
                await self._answer_pending(state, tools, turn, caller, emit, save)
                continue
            offer_tools = bool(specs) and state.steps < turn.max_steps
            if not offer_tools and state.steps > 0:
                state.messages.append({"role": "user", "content": FINAL_NUDGE})
            request = replace(turn.request, messages=state.messages, tools=specs if offer_tools else None,
                              tool_choice=turn.request.tool_choice if offer_tools and state.steps == 0 else None,
                              parallel_tool_calls=turn.request.parallel_tool_calls if offer_tools else None)
            try:
                if unseen:
                    result = await complete_after_prefix(ask, request, unseen, stream.delta)
                    unseen = ""
                else:
                    result = await ask(request, stream.delta)
            finally:
                await stream.end()
            state.usage = state.usage.add(result.usage)
            # A call of a caller's tool ends the loop: the caller runs it (this turn's calls of the
            # agent's own tools are not made — the caller's answer starts the next turn).
            theirs = [c for c in result.tool_calls if c.name in client]
            if theirs and offer_tools:
                result.tool_calls = theirs
            if not result.tool_calls or not offer_tools or theirs:
                result.usage = state.usage
                return result
            state.steps += 1
            state.messages.append(
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
            state.pending = [PendingCall(id=c.id, name=c.name, arguments=c.arguments,
                                         arguments_error=c.arguments_error) for c in result.tool_calls]
            await save()  # a takeover does not ask the model for this step again

    async def _answer_pending(self, state: AgentLoop, tools: dict[str, ToolDescriptor], turn: AgentTurn,
                              caller: ToolCaller, emit: EventEmit, save: Callable[[], Awaitable[None]]) -> None:
        """Answer the current step's calls that have no result yet — the others in parallel, then
        the high-risk ones one by one, each after its approval — and hand every result to the
        model's conversation in the order of the calls."""
        todo = [c for c in state.pending if c.id not in state.results]
        gated = [c for c in todo if _needs_approval(c, tools.get(c.name), turn)]

        async def answer(call: PendingCall, refused: ToolReply | None = None, approved: bool = False) -> None:
            reply = await self._run_tool(call, tools, turn, caller, emit, refused, approved)
            state.results[call.id] = _tool_content(reply)
            await save()  # each result is kept: a takeover never calls a finished tool again

        await asyncio.gather(*[answer(c) for c in todo if c not in gated])
        for call in gated:
            decision = state.decision if state.decision is not None and state.decision.call_id == call.id else None
            if decision is None:
                state.awaiting = call.id
                await save()
                tool = tools[call.name]
                raise ToolApprovalNeeded(call.id, tool.name, call.arguments, state.usage)
            state.awaiting, state.decision = None, None
            approved = decision.decision == "approve"
            if approved and decision.args is not None:
                call = _edited(state, call, decision.args)
            await answer(call, None if approved else _rejected(decision), approved)
        for call in state.pending:
            state.messages.append({"role": "tool", "tool_call_id": call.id, "content": state.results[call.id]})
        state.pending, state.results = [], {}
        await save()

    async def _run_tool(
        self, call: PendingCall, tools: dict[str, ToolDescriptor], turn: AgentTurn, caller: ToolCaller,
        emit: EventEmit, refused: ToolReply | None = None, approved: bool = False
    ) -> ToolReply:
        tool = tools.get(call.name)
        refused = refused or _refusal(call, tool, tools, turn, approved)
        args: dict[str, Any] = {}
        shown = call.arguments
        if tool is not None and refused is None:
            # The model never chooses an injected value: what it wrote there is dropped. What it
            # left out takes the node's default for it.
            written = {k: v for k, v in call.arguments.items() if k not in tool.inject}
            shown = {**turn.defaults.get(tool.name, {}), **call.arguments}
            args = inject({**turn.defaults.get(tool.name, {}), **written}, tool.inject, turn.inject)
        # The event shows the arguments as the model wrote them (and the defaults it left to the
        # node): never the injected values.
        return await execute_tool(_RepliesOnFailure(caller), emit, turn.meta, call_id=call.id,
                                  tool=tool.name if tool is not None else call.name,
                                  args=args, shown_args=shown, timeout_s=self.tool_timeout_s,
                                  refused=refused)


def _edited(state: AgentLoop, call: PendingCall, args: dict[str, Any]) -> PendingCall:
    """The call as the approver edited it: it runs with those arguments, and the model's
    conversation shows it made that call (so its result reads as the answer to it)."""
    edited = call.model_copy(update={"arguments": args, "arguments_error": None})
    state.pending = [edited if c.id == call.id else c for c in state.pending]
    for message in state.messages:
        for made in message.get("tool_calls") or []:
            if made.get("id") == call.id:
                made["function"]["arguments"] = json.dumps(args, ensure_ascii=False)
    return edited


def _cut_off_turn(streamed: str, kept: list[dict[str, Any]]) -> str:
    """What was streamed of the model turn a dead dispatcher was in: the node's streamed text past
    the text of the turns its checkpoint kept (none when they do not account for it, e.g. a
    redacted stream: then the turn streams again rather than risk a wrong answer)."""
    earlier = "".join(m.get("content") or "" for m in kept if m.get("role") == "assistant")
    return streamed[len(earlier):] if streamed.startswith(earlier) else ""


def _needs_approval(call: PendingCall, tool: ToolDescriptor | None, turn: AgentTurn) -> bool:
    """A high-risk call waits for a person when the loop can park (it has a keeper)."""
    return (turn.keeper is not None and tool is not None and tool.high_risk and not turn.allow_high_risk
            and not call.arguments_error)


def _rejected(decision: ToolDecision) -> ToolReply:
    said = f": {decision.comment}" if decision.comment else ""
    return ToolReply.failure("rejected", f"The user refused this tool call{said}. Do not call it again; "
                                         "answer with what you have or say what you would need.")


def _refusal(
    call: PendingCall, tool: ToolDescriptor | None, tools: dict[str, ToolDescriptor], turn: AgentTurn,
    approved: bool = False
) -> ToolReply | None:
    """The reply to a call that must not reach a tool, or None when it may."""
    if tool is None:
        return ToolReply.failure(
            "unknown_tool",
            f"no tool named {call.name!r} is available here; available: {', '.join(sorted(tools)) or 'none'}",
        )
    if call.arguments_error:
        return ToolReply.failure("bad_arguments", f"{call.name}: {call.arguments_error}")
    if tool.high_risk and not (turn.allow_high_risk or approved):
        return ToolReply.failure(
            "approval_required",
            f"tool {call.name!r} is high-risk and needs a human approval; this node does not allow it",
        )
    return None


class _RepliesOnFailure:
    """The tool caller as the agent uses it: a transport failure is a tool error the model can see
    (and answer), not the end of the node."""

    def __init__(self, caller: ToolCaller) -> None:
        self._caller = caller

    async def list_tools(self) -> list[ToolDescriptor]:
        return await self._caller.list_tools()

    async def call(
        self, tool: str, args: dict[str, Any], meta: ToolMeta, *, timeout_s: float | None = None
    ) -> ToolReply:
        try:
            return await self._caller.call(tool, args, meta, timeout_s=timeout_s)
        except Exception as exc:
            return ToolReply.failure("tool_failed", f"{tool} failed: {type(exc).__name__}: {exc}")


run_agent = ReactAgent()
