"""What a node handler sees: its plan node, the template scope, and the task's ports — the model
(`complete`, `run_agent`), the tool registry, the budget and the event sink. Handlers return the
node's output or raise NodeError. Node bodies live in `nodes/`; the tool executor in `tool_calls`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.dispatcher.engine.agent_loop import AgentLoop, CheckpointKeeper
from services.dispatcher.engine.compile import Plan, PlanNode
from services.dispatcher.engine.ports import Decision, EventSink
from services.dispatcher.engine.spans import llm_span, record_result, traced
from services.dispatcher.engine.stream_events import StreamEvents
from services.dispatcher.engine.streamed import complete_after_prefix
from services.dispatcher.harness.evaluate import EvalOutcome, Evaluator
from services.dispatcher.llm.api import (
    LLM,
    AgentRunner,
    AgentTurn,
    BudgetExceeded,
    DeltaSink,
    LLMError,
    LLMRequest,
    LLMResult,
    ModelNotice,
    TokenBudget,
    ToolApprovalNeeded,
    ToolCaller,
)
from shared.contract.events import ErrorEvent, EventBase, GuardrailEvent
from shared.contract.models import Usage
from shared.contract.templates import RetrieverOutput, TemplateProblem
from shared.contract.tools import ToolDescriptor, ToolMeta
from shared.errors import AgentixError


class NodeError(AgentixError):
    """A node failed cleanly; `code` is stable (e.g. `tool_error`, `bad_output`, `timeout`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


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
    # A takeover: per node that was running when its dispatcher died, the tokens clients have
    # already seen (`streamed.already_streamed`); its first streamed call does not repeat them.
    streamed: dict[str, str] = field(default_factory=dict)


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
    # The checkpoint's agent loops (`Checkpoint.agents`) and the write of the whole checkpoint:
    # an agent node's tool loop keeps its progress there. None outside a run (no checkpoint).
    agents: dict[str, AgentLoop] = field(default_factory=dict)
    checkpoint: Callable[[], Awaitable[None]] | None = None

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

    def stream_events(self, model: str | None = None) -> StreamEvents:
        """This node's events of one model call's stream (its `delta` is the call's sink)."""
        return StreamEvents(self.emit, self.task.task_id, self.node.id, model)

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
            llm = NodeLLM(self.shared.deps.llm, self, count=False)
            events = self.stream_events(request.model) if stream else None
            prefix = self.shared.deps.streamed.pop(self.node.id, "") if events is not None else ""
            try:
                if prefix and events is not None:
                    async def call(req: LLMRequest, on_delta: DeltaSink) -> LLMResult:
                        return await llm.complete(req, budget=self.shared.budget, on_delta=on_delta)

                    result = await complete_after_prefix(call, request, prefix, events.delta)
                else:
                    result = await llm.complete(request, budget=self.shared.budget,
                                                on_delta=events.delta if events is not None else None)
            finally:
                if events is not None:
                    await events.end()
            record_result(current, result)
        self.count(result.usage)
        return result

    async def tell(self, notices: list[ModelNotice]) -> None:
        """What the breakers did during this node's model calls, as the node's `error` events
        (`breaker_open`, `model_skipped`); the node itself goes on (failover)."""
        for notice in notices:
            await self.emit(ErrorEvent(task_id=self.task.task_id, node_id=self.node.id, code=notice.code,
                                       message=notice.message))

    async def run_agent(self, request: LLMRequest, tools: list[ToolDescriptor], max_steps: int, *,
                        resumable: bool = False, defaults: dict[str, dict[str, Any]] | None = None,
                        client_tools: list[dict[str, Any]] | None = None) -> LLMResult:
        """The ReAct loop. `resumable` (an agent node's own loop): its progress is checkpointed and a
        high-risk tool call parks the node for an approval (`ToolApprovalNeeded` propagates, its
        usage counted for the node)."""
        runner = self.shared.deps.agent
        if runner is None:
            raise NodeError("no_agent_runner", f"node {self.node.id!r} uses tools but no agent runner is set")
        if request.model is None:
            request.model = self.task.model
        shared = self.shared
        keeper = (CheckpointKeeper(shared.agents, self.node.id, shared.checkpoint)
                  if resumable and shared.checkpoint is not None else None)
        turn = AgentTurn(node_id=self.node.id, request=request, tools=tools, meta=self.meta,
                         inject=self.inject_values(), defaults=defaults or {}, max_steps=max_steps, keeper=keeper,
                         streamed=self.shared.deps.streamed.pop(self.node.id, ""), client_tools=client_tools or [])

        async def emit(event: EventBase) -> None:
            await self.emit(event)

        # One span for the whole ReAct loop; each model call and tool call inside is a child.
        with llm_span("llm.agent", self.task.task_id, self.node.id, request.model) as current:
            llm = NodeLLM(traced(self.shared.deps.llm, self.task.task_id, self.node.id), self, count=False)
            try:
                result = await runner(llm, turn, caller=self.shared.deps.tools, emit=emit, budget=self.shared.budget)
            except ToolApprovalNeeded as parked:
                self.count(parked.usage)
                raise
            record_result(current, result)
        self.count(result.usage)
        return result

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


class NodeLLM:
    """The LLM as a node's code uses it: the breaker notices every call returns (on its result
    or its error) become the node's events; with `count`, every call's usage counts for the node
    (the evaluator's calls; the agent runner and `complete` report their usage themselves)."""

    def __init__(self, llm: LLM, ctx: NodeContext, *, count: bool) -> None:
        self._llm = llm
        self._ctx = ctx
        self._count = count

    @property
    def chain_revision(self) -> int:
        return self._llm.chain_revision

    async def complete(self, request: LLMRequest, *, budget: TokenBudget | None = None,
                       on_delta: DeltaSink | None = None) -> LLMResult:
        try:
            result = await self._llm.complete(request, budget=budget, on_delta=on_delta)
        except (LLMError, BudgetExceeded) as exc:
            await self._ctx.tell(exc.notices)
            raise
        await self._ctx.tell(result.notices)
        if self._count:
            self._ctx.count(result.usage)
        return result

    def __getattr__(self, name: str) -> Any:  # anything else the runner may use (e.g. `config`)
        return getattr(self._llm, name)
