"""What a node handler sees: its plan node, the template scope, and the task's ports
(LLM, tools, agent runner, budget, events). Handlers return the node's output or raise NodeError."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from services.dispatcher.engine.compile import Plan, PlanNode
from services.dispatcher.engine.ports import Decision, EventSink
from services.dispatcher.engine.spans import llm_span, record_result, traced
from services.dispatcher.harness.evaluate import EvalOutcome, Evaluator
from services.dispatcher.llm.api import (
    LLM,
    AgentRunner,
    AgentTurn,
    Delta,
    DeltaSink,
    LLMRequest,
    LLMResult,
    TokenBudget,
    ToolCaller,
)
from shared.contract.dsl import AgentConfig, ToolConfig
from shared.contract.events import (
    EventBase,
    GuardrailEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from shared.contract.models import Usage
from shared.contract.templates import RetrieverOutput, TemplateProblem
from shared.contract.tools import ToolDescriptor, ToolMeta

PREVIEW_CHARS = 300
_CALL_IDS = itertools.count(1)  # call ids need only be unique within a task's trace
# The node whose work the current asyncio task does (set by the runner in each node's task), so
# code below the engine — e.g. breaker notices of the model layer — can name the node.
CURRENT_NODE: ContextVar[str | None] = ContextVar("agentix_current_node", default=None)
DEFAULT_EVALUATOR = Evaluator()


class NodeError(Exception):
    """A node failed cleanly; `code` is stable (e.g. `tool_error`, `bad_output`, `timeout`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    if value is None:
        return "null"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class TaskSpec:
    """One task as the runner sees it (from a TaskMessage plus pinned control-plane values)."""

    task_id: str
    user_id: str
    input: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    token_budget: int | None = None
    timeout_s: float | None = None
    model: str | None = None
    retry: int = 0
    prompts: dict[str, str] = field(default_factory=dict)
    prompt_versions: dict[str, int] = field(default_factory=dict)
    message: dict[str, Any] | None = None  # kept in the checkpoint for resumes
    chain: dict[str, Any] | None = None  # the pinned model chain (kept in the checkpoint)
    # Tier-1 guardrail flags of a grey input: the tier-2 guardrail classifies it before the run.
    guardrail_grey: list[str] = field(default_factory=list)


Guard = Callable[[TaskSpec, TokenBudget | None], Awaitable[tuple[GuardrailEvent, Usage]]]
"""Tier-2 input guardrail: classifies the task input; its `guardrail` event says allow/block,
and the usage of the classifier call counts for the task."""


@dataclass
class Deps:
    llm: LLM
    tools: ToolCaller
    store: Any  # CheckpointStore
    events: EventSink
    agent: AgentRunner | None = None
    # Largest checkpoint the store takes (bytes; NATS max_payload): over it the task fails
    # `checkpoint_too_large` instead of crashing on every delivery.
    checkpoint_limit: int | None = None
    guardrail: Guard | None = None
    evaluator: Evaluator | None = None  # agent nodes with `evaluate` (default: Evaluator())


@dataclass
class RunShared:
    """State shared by every node of one run."""

    plan: Plan
    task: TaskSpec
    deps: Deps
    budget: TokenBudget | None
    outputs: dict[str, Any]
    prompts: dict[str, str]
    decisions: Mapping[str, Decision]
    registry: dict[str, ToolDescriptor] | None = None

    async def tool_registry(self) -> dict[str, ToolDescriptor]:
        if self.registry is None:
            if self.plan.tools is not None:
                self.registry = dict(self.plan.tools)
            else:
                self.registry = {t.name: t for t in await self.deps.tools.list_tools()}
        return self.registry


class NodeContext:
    def __init__(self, shared: RunShared, node: PlanNode) -> None:
        self.shared = shared
        self.node = node
        self.task = shared.task
        self.usage: Usage | None = None  # made on the first model call: most nodes make none
        self.evaluation: EvalOutcome | None = None
        self._scope: dict[str, Any] | None = None

    def count(self, usage: Usage) -> None:
        self.usage = usage if self.usage is None else self.usage.add(usage)

    # -- templates ------------------------------------------------------------------------------
    @property
    def scope(self) -> dict[str, Any]:
        if self._scope is None:
            task = self.task
            scope: dict[str, Any] = {
                "input": task.input,
                "task": {"id": task.task_id, "user_id": task.user_id},
                "prompts": self.shared.prompts,
            }
            outputs = self.shared.outputs
            retrievers = self.shared.plan.retriever_ids
            for ref in self.node.refs:
                value = outputs.get(ref)
                if ref in retrievers and isinstance(value, dict):
                    value = RetrieverOutput(value)
                scope[ref] = value
            self._scope = scope
        return self._scope

    def _with(self, extra: Mapping[str, Any] | None) -> Mapping[str, Any]:
        return {**self.scope, **extra} if extra else self.scope

    def _compiled(self, path: str) -> Any:
        try:
            return self.node.templates[path]
        except KeyError:
            raise NodeError("internal", f"node {self.node.id!r}: no template at {path}") from None

    def _named(self, exc: TemplateProblem, path: str) -> NodeError:
        exc.node_id, exc.field = self.node.id, path
        return NodeError("template", str(exc))

    def render(self, path: str, extra: Mapping[str, Any] | None = None) -> str:
        try:
            return self._compiled(path).render(self._with(extra))
        except TemplateProblem as exc:
            raise self._named(exc, path) from exc

    def evaluate(self, path: str, extra: Mapping[str, Any] | None = None) -> Any:
        try:
            return self._compiled(path).evaluate(self._with(extra))
        except TemplateProblem as exc:
            raise self._named(exc, path) from exc

    def render_tree(self, value: Any, path: str, extra: Mapping[str, Any] | None = None) -> Any:
        """Render every string leaf of a JSON value (paths as in `template_fields`)."""
        if isinstance(value, str):
            return self.render(path, extra)
        if isinstance(value, dict):
            return {k: self.render_tree(v, f"{path}.{k}", extra) for k, v in value.items()}
        if isinstance(value, list):
            return [self.render_tree(v, f"{path}[{i}]", extra) for i, v in enumerate(value)]
        return value

    # -- events ---------------------------------------------------------------------------------
    async def emit(self, event: EventBase) -> None:
        """Emit an event of this node (events made by other code get this task/node filled in)."""
        if event.task_id != self.task.task_id:
            event.task_id = self.task.task_id
        if event.node_id is None:
            event.node_id = self.node.id
        await self.shared.deps.events.emit(event)

    def delta_sink(self, model: str | None = None) -> DeltaSink:
        async def sink(delta: Delta) -> None:
            if delta.kind == "thinking":
                await self.emit(ThinkingEvent(task_id=self.task.task_id, node_id=self.node.id, text=delta.text))
            else:
                await self.emit(TokenEvent(task_id=self.task.task_id, node_id=self.node.id, text=delta.text,
                                           model=delta.model or model))

        return sink

    # -- model ----------------------------------------------------------------------------------
    @property
    def meta(self) -> ToolMeta:
        return ToolMeta(task_id=self.task.task_id, node_id=self.node.id, user_id=self.task.user_id,
                        session_id=self.task.session_id)

    def inject_values(self) -> dict[str, Any]:
        return {"user_id": self.task.user_id, "session_id": self.task.session_id, "task_id": self.task.task_id}

    async def complete(self, request: LLMRequest, *, stream: bool = True) -> LLMResult:
        if request.model is None:
            request.model = self.task.model
        with llm_span("llm.complete", self.task.task_id, self.node.id, request.model) as current:
            result = await self.shared.deps.llm.complete(
                request, budget=self.shared.budget, on_delta=self.delta_sink(request.model) if stream else None
            )
            record_result(current, result)
        self.count(result.usage)
        return result

    async def run_agent(self, request: LLMRequest, tools: list[ToolDescriptor], max_steps: int) -> LLMResult:
        runner = self.shared.deps.agent
        if runner is None:
            raise NodeError("no_agent_runner", f"node {self.node.id!r} uses tools but no agent runner is set")
        if request.model is None:
            request.model = self.task.model
        turn = AgentTurn(node_id=self.node.id, request=request, tools=tools, meta=self.meta,
                         inject=self.inject_values(), max_steps=max_steps)

        async def emit(event: EventBase) -> None:
            await self.emit(event)

        # One span for the whole ReAct loop; each model call and tool call inside is a child.
        with llm_span("llm.agent", self.task.task_id, self.node.id, request.model) as current:
            llm = traced(self.shared.deps.llm, self.task.task_id, self.node.id)
            result = await runner(llm, turn, caller=self.shared.deps.tools, emit=emit, budget=self.shared.budget)
            record_result(current, result)
        self.count(result.usage)
        return result

    def retrieved_chunks(self) -> list[str]:
        """The chunk texts of the retrievers this node's templates read (its RAG context)."""
        texts: list[str] = []
        for ref in sorted(self.node.refs & self.shared.plan.retriever_ids):
            value = self.shared.outputs.get(ref)
            chunks = value.get("chunks") if isinstance(value, dict) else None
            for chunk in chunks if isinstance(chunks, list) else []:
                text = chunk.get("text") if isinstance(chunk, dict) else None
                if isinstance(text, str) and text.strip():
                    texts.append(text)
        return texts

    async def evaluate_answer(self, request: LLMRequest, result: LLMResult, *, stream: bool) -> LLMResult:
        """`evaluate`: rules + judge + faithfulness to the retrieved chunks → `eval` event; a poor
        answer is regenerated once with the critique (an `eval` event with grade poor comes
        first, then the new answer's tokens, then the final `eval` with `regenerated`)."""
        evaluator = self.shared.deps.evaluator or DEFAULT_EVALUATOR
        llm = _Counted(traced(self.shared.deps.llm, self.task.task_id, self.node.id), self)

        async def on_poor(first: EvalOutcome) -> None:
            await self.emit(first.event(self.task.task_id, self.node.id))

        final, outcome = await evaluator.run(
            llm, request, result, chunks=self.retrieved_chunks(), budget=self.shared.budget,
            on_delta=self.delta_sink(request.model) if stream else None, on_poor=on_poor)
        self.evaluation = outcome
        await self.emit(outcome.event(self.task.task_id, self.node.id))
        return final

    async def tools_for(self, names: list[str] | str | None) -> list[ToolDescriptor]:
        if not names:
            return []
        registry = await self.shared.tool_registry()
        if names == "auto":
            return [t for t in registry.values() if t.agent]
        missing = [n for n in names if n not in registry]
        if missing:
            raise NodeError("unknown_tool", f"node {self.node.id!r}: unknown tool(s) {', '.join(missing)}")
        return [registry[n] for n in names]

    # -- tools ----------------------------------------------------------------------------------
    async def call_tool(self, tool: str, args: dict[str, Any], timeout_s: float | None = None) -> Any:
        """A direct tool call with tool.call/tool.result events; runtime values are injected."""
        registry = await self.shared.tool_registry()
        descriptor = registry.get(tool)
        if descriptor is not None:
            values = self.inject_values()
            for name in descriptor.inject:
                if values.get(name) is not None:
                    args[name] = values[name]
        call_id = f"{self.node.id}.{next(_CALL_IDS)}"
        await self.emit(ToolCallEvent(task_id=self.task.task_id, node_id=self.node.id, call_id=call_id, tool=tool,
                                      args=args))
        started = time.perf_counter()
        reply = await self.shared.deps.tools.call(tool, args, self.meta, timeout_s=timeout_s)
        duration = (time.perf_counter() - started) * 1000
        if reply.ok:
            await self.emit(ToolResultEvent(task_id=self.task.task_id, node_id=self.node.id, call_id=call_id, ok=True,
                                                            duration_ms=duration,
                                                            result_preview=preview(reply.result)))
            return reply.result
        error = reply.error
        message = f"{error.code}: {error.message}" if error else "unknown tool error"
        await self.emit(ToolResultEvent(task_id=self.task.task_id, node_id=self.node.id, call_id=call_id, ok=False,
                                        duration_ms=duration,
                                        error=message))
        raise NodeError("tool_error", f"node {self.node.id!r}: tool {tool!r} failed: {message}")


def parse_json_output(node_id: str, text: str) -> Any:
    """An agent's `output: json`: the text (code fences allowed) must parse as JSON."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        return json.loads(body)
    except ValueError as exc:
        raise NodeError("bad_output", f"node {node_id!r}: the model's answer is not valid JSON ({exc})") from exc


class _Counted:
    """The LLM as the evaluator uses it: every call's usage counts for the node."""

    def __init__(self, llm: LLM, ctx: NodeContext) -> None:
        self._llm = llm
        self._ctx = ctx

    @property
    def chain_revision(self) -> int:
        return self._llm.chain_revision

    async def complete(self, request: LLMRequest, *, budget: TokenBudget | None = None,
                       on_delta: DeltaSink | None = None) -> LLMResult:
        result = await self._llm.complete(request, budget=budget, on_delta=on_delta)
        self._ctx.count(result.usage)
        return result


async def run_agent_body(ctx: NodeContext, config: AgentConfig, prefix: str,
                         extra: Mapping[str, Any] | None = None, *, stream: bool = True,
                         evaluate: bool = False) -> Any:
    """An agent node (or a map body): system + prompt, then the model or the ReAct runner;
    with `evaluate`, the answer is evaluated (and regenerated once if poor)."""
    messages: list[dict[str, Any]] = []
    if config.system is not None:
        messages.append({"role": "system", "content": ctx.render(f"{prefix}.system", extra)})
    messages.append({"role": "user", "content": ctx.render(f"{prefix}.prompt", extra)})
    request = LLMRequest(messages=messages, model=config.model or None, temperature=config.temperature,
                         max_tokens=config.max_tokens, json_output=config.output == "json", stream=stream)
    tools = await ctx.tools_for(config.tools)
    if tools:
        result = await ctx.run_agent(request, tools, config.max_steps)
    else:
        result = await ctx.complete(request, stream=stream)
    if evaluate:
        result = await ctx.evaluate_answer(request, result, stream=stream)
    if config.output == "json":
        return parse_json_output(ctx.node.id, result.text)
    return result.text


async def run_tool_body(ctx: NodeContext, config: ToolConfig, prefix: str,
                        extra: Mapping[str, Any] | None = None) -> Any:
    args = ctx.render_tree(config.args, f"{prefix}.args", extra)
    return await ctx.call_tool(config.tool, args, timeout_s=config.timeout_s)


async def gather_all(coros: list[Any]) -> list[Any]:
    """Run coroutines concurrently; the first exception cancels the others and is re-raised as
    itself (not wrapped in an ExceptionGroup), so BudgetExceeded/cancellation propagate plainly."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
