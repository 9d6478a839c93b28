"""The interface between the graph engine and the model layer. The engine depends only on this
module; `llm/` implements it (pool, failover, breakers, cache, redaction, offline model, ReAct)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from shared.contract.models import Usage
from shared.contract.sampling import Sampling
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply
from shared.errors import AgentixError


@dataclass(frozen=True)
class ModelNotice:
    """What the circuit breakers did during one call, for the task to hear although the call
    went on (failover): `breaker_open` (this call tripped a model's breaker) or `model_skipped`
    (a model was skipped because its breaker is open). Returned with the call's result or on
    the exception it raised; the caller decides how to report it."""

    code: Literal["breaker_open", "model_skipped"]
    model: str
    message: str


class LLMError(AgentixError):
    """A model call failed for good (after retries and failover). `code` is one of
    rate_limited, timeout, model_not_found, auth, context_too_long, bad_request, unavailable,
    stream_broken, no_model. `retryable`: a later call may succeed (what failed may pass by
    itself). `notices`: what the breakers did before it failed."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)
        self.notices: list[ModelNotice] = []


class BudgetExceeded(AgentixError):
    """The task's token budget was crossed; the whole graph must stop (`budget_exceeded`).
    `notices`: what the breakers did in the call that crossed it, before it was crossed."""

    code = "budget_exceeded"

    def __init__(self, used: int, limit: int) -> None:
        super().__init__(f"token budget exceeded: {used} > {limit}")
        self.used = used
        self.limit = limit
        self.notices: list[ModelNotice] = []


@dataclass
class TokenBudget:
    """Shared by every call of one task. `charge` raises BudgetExceeded once `used` > `limit`."""

    limit: int
    used: int = 0

    def charge(self, tokens: int) -> None:
        self.used += tokens
        if self.used > self.limit:
            raise BudgetExceeded(self.used, self.limit)


@dataclass
class Delta:
    kind: Literal["token", "thinking", "tool_input"]
    text: str
    model: str | None = None  # the alias of the model streaming it (e.g. "offline")
    # `tool_input`: a piece of the arguments of the call `call_id` to the function `tool`.
    call_id: str | None = None
    tool: str | None = None


DeltaSink = Callable[[Delta], Awaitable[None]]


@dataclass
class ToolCallRequest:
    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None  # set when the model's arguments were not a JSON object


@dataclass
class LLMRequest:
    """OpenAI-format `messages`. `model` is an alias; None means the task's pinned chain."""

    messages: list[dict[str, Any]]
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None  # OpenAI function specs
    json_output: bool = False
    # A client's own choices, as OpenAI's API takes them (sent only with `tools`; a
    # `response_format` wins over `json_output`).
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    # The agent's other sampling choices (docs/DSL.md `sampling`): an OpenAI-protocol model gets
    # the ones set; the offline model honours `stop` only.
    sampling: Sampling | None = None
    stream: bool = True


@dataclass
class LLMResult:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    cached: bool = False
    thinking: str = ""  # reasoning text, when the model streams it
    finish_reason: str | None = None  # "stop", "length", "tool_calls"…
    notices: list[ModelNotice] = field(default_factory=list)  # breaker news of this call


class LLM(Protocol):
    """One model, or a failover chain of them (`llm/failover.py`), pinned to one chain revision
    for one task: a chain is itself an `LLM`, so callers never know which they hold."""

    @property
    def chain_revision(self) -> int: ...

    async def complete(
        self, request: LLMRequest, *, budget: TokenBudget | None = None, on_delta: DeltaSink | None = None
    ) -> LLMResult: ...


class ToolCaller(Protocol):
    """Tool registry and calls over NATS (implemented on `shared.bus`)."""

    async def list_tools(self) -> list[ToolDescriptor]: ...

    async def call(
        self, tool: str, args: dict[str, Any], meta: ToolMeta, *, timeout_s: float | None = None
    ) -> ToolReply: ...


EventEmit = Callable[..., Awaitable[None]]
"""`await emit(event_model)` — publishes one event of the running task (n/ts are assigned)."""


class LoopKeeper(Protocol):
    """Where an agent loop keeps its progress — the task's checkpoint — so that a resume (after a
    tool approval, or on another dispatcher after a crash) continues the loop instead of starting
    it again. The state is the engine's own model (`engine.agent_loop.AgentLoop`)."""

    @property
    def state(self) -> Any: ...  # what an earlier run of this node left, or None

    async def save(self, state: Any) -> None: ...


class ToolApprovalNeeded(Exception):  # control flow, not a failure: deliberately not an AgentixError
    """A high-risk tool call waits for a person's decision: the loop's state is kept (see
    `LoopKeeper`) and the node parks until the decision comes. `usage`: what the loop's model
    calls spent in this run so far."""

    def __init__(self, call_id: str, tool: str, args: dict[str, Any], usage: Usage) -> None:
        super().__init__(f"tool {tool!r} (call {call_id}) needs an approval")
        self.call_id = call_id
        self.tool = tool
        self.arguments = args
        self.usage = usage


@dataclass
class AgentTurn:
    """Everything `run_agent` needs for one agent node. With a `keeper`, a high-risk tool call
    pauses the loop for an approval (`ToolApprovalNeeded`) and the loop is checkpointed after each
    model turn and each tool result; without one (map bodies, experts), such a call is refused."""

    node_id: str
    request: LLMRequest
    tools: list[ToolDescriptor]  # already filtered to the node's `tools`
    meta: ToolMeta
    inject: dict[str, Any]  # runtime values (user_id, session_id, kb…) added to tool args
    defaults: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool → args the model may leave out
    streamed: str = ""  # after a takeover: the node's text clients already saw (not streamed again)
    max_steps: int = 8
    allow_high_risk: bool = False  # high-risk tools run without an approval
    keeper: LoopKeeper | None = None
    # The caller's own function specs, offered with the tools but never run: a model turn that
    # calls one ends the loop with the calls of it (the caller runs them).
    client_tools: list[dict[str, Any]] = field(default_factory=list)


class AgentRunner(Protocol):
    """ReAct: the model may call tools (several in parallel), sees results, continues, up to
    max_steps. Emits token/thinking/tool.call/tool.result events through `emit`."""

    async def __call__(
        self, llm: LLM, turn: AgentTurn, *, caller: ToolCaller, emit: EventEmit, budget: TokenBudget | None
    ) -> LLMResult: ...
