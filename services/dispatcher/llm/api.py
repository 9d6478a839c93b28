"""The interface between the graph engine and the model layer. The engine depends only on this
module; `llm/` implements it (pool, failover, breakers, cache, redaction, offline model, ReAct)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from shared.contract.models import Usage
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply


class LLMError(Exception):
    """A model call failed for good (after retries and failover). `code` is one of
    rate_limited, timeout, model_not_found, auth, context_too_long, bad_request, unavailable,
    stream_broken, no_model."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class BudgetExceeded(Exception):
    """The task's token budget was crossed; the whole graph must stop (`budget_exceeded`)."""

    def __init__(self, used: int, limit: int) -> None:
        super().__init__(f"token budget exceeded: {used} > {limit}")
        self.used = used
        self.limit = limit


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
    kind: Literal["token", "thinking"]
    text: str
    model: str | None = None  # the alias of the model streaming it (e.g. "offline")


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


class LLM(Protocol):
    """A model (or a whole failover chain) pinned to one chain revision for one task."""

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


@dataclass
class AgentTurn:
    """Everything `run_agent` needs for one agent node."""

    node_id: str
    request: LLMRequest
    tools: list[ToolDescriptor]  # already filtered to the node's `tools`
    meta: ToolMeta
    inject: dict[str, Any]  # runtime values (user_id, session_id, kb…) added to tool args
    max_steps: int = 8
    allow_high_risk: bool = False  # high-risk tools are refused unless the node allows them


class AgentRunner(Protocol):
    """ReAct: the model may call tools (several in parallel), sees results, continues, up to
    max_steps. Emits token/thinking/tool.call/tool.result events through `emit`."""

    async def __call__(
        self, llm: LLM, turn: AgentTurn, *, caller: ToolCaller, emit: EventEmit, budget: TokenBudget | None
    ) -> LLMResult: ...
