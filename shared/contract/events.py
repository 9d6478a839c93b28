"""Every event of a task (and of an ingestion job), as published on
`P.events.<id>.<channel>` and served over SSE. `n` is a per-id counter so readers can detect gaps."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from shared.contract.base import Contract, utcnow
from shared.contract.models import Usage

Channel = Literal["status", "token", "exec"]
CHANNELS: tuple[Channel, ...] = ("status", "token", "exec")


class EventBase(Contract):
    type: str
    task_id: str
    n: int = 0
    # Set by `stamp` when the event is emitted (every published event has it); not at creation,
    # which is on the engine's hot path and would be overwritten anyway.
    ts: datetime | None = None
    node_id: str | None = None

    def stamp(self, n: int) -> None:
        """Number and time the event as its emitter sends it. Plain assignment to the model's
        fields (these two need no validation), at a fraction of pydantic's `__setattr__` cost."""
        self.__dict__["n"] = n
        self.__dict__["ts"] = utcnow()
        self.__pydantic_fields_set__.update(("n", "ts"))

    @property
    def channel(self) -> Channel:
        return CHANNEL_OF.get(self.type, "exec")

    def sse_data(self) -> str:
        """The SSE `data` line: the event without its `type` (that is the SSE `event` name)."""
        return self.model_dump_json(exclude_none=True, exclude={"type"})


class StatusEvent(EventBase):
    type: Literal["status"] = "status"
    status: str
    error: str | None = None
    code: str | None = None
    # Which control-plane revisions the run is pinned to (set on the first `running`).
    chain_revision: int | None = None
    prompt_versions: dict[str, int] | None = None
    retry: int | None = None


class NodeStartEvent(EventBase):
    type: Literal["node.start"] = "node.start"
    kind: str


class NodeEndEvent(EventBase):
    type: Literal["node.end"] = "node.end"
    status: Literal["done", "failed", "cancelled"]
    duration_ms: float
    output_preview: str | None = None
    error: str | None = None
    kind: str | None = None
    usage: Usage | None = None
    # An agent node with `evaluate`: the evaluation of its final answer (see the `eval` event).
    score: float | None = None
    grade: Literal["ok", "warn", "poor"] | None = None


class NodeSkipEvent(EventBase):
    type: Literal["node.skip"] = "node.skip"


class TokenEvent(EventBase):
    type: Literal["token"] = "token"
    text: str
    model: str | None = None


class ThinkingEvent(EventBase):
    type: Literal["thinking"] = "thinking"
    text: str


class ToolCallEvent(EventBase):
    type: Literal["tool.call"] = "tool.call"
    call_id: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResultEvent(EventBase):
    type: Literal["tool.result"] = "tool.result"
    call_id: str
    ok: bool
    duration_ms: float
    result_preview: str | None = None
    error: str | None = None


class BranchEvent(EventBase):
    type: Literal["branch"] = "branch"
    handle: str


class ApprovalRequestEvent(EventBase):
    type: Literal["approval.request"] = "approval.request"
    message: str
    timeout_s: float | None = None


class ApprovalDecisionEvent(EventBase):
    type: Literal["approval.decision"] = "approval.decision"
    decision: str
    by: str
    comment: str | None = None


class ExpertStartEvent(EventBase):
    type: Literal["expert.start"] = "expert.start"
    name: str
    brief: str


class ExpertEndEvent(EventBase):
    type: Literal["expert.end"] = "expert.end"
    name: str
    status: str


class EvalEvent(EventBase):
    type: Literal["eval"] = "eval"
    score: float
    grade: Literal["ok", "warn", "poor"]
    regenerated: bool = False
    reasons: list[str] = Field(default_factory=list)


class GuardrailEvent(EventBase):
    type: Literal["guardrail"] = "guardrail"
    tier: int
    action: Literal["allow", "block", "flag", "redact"]
    reason: str


class BudgetEvent(EventBase):
    type: Literal["budget"] = "budget"
    used: int
    limit: int


class ErrorEvent(EventBase):
    type: Literal["error"] = "error"
    code: str
    message: str


class DoneEvent(EventBase):
    type: Literal["done"] = "done"
    status: str
    output: Any = None
    error: str | None = None
    usage: Usage | None = None
    # Ingestion jobs end with these instead of `output`.
    document_id: str | None = None
    chunks: int | None = None


class ProgressEvent(EventBase):
    type: Literal["progress"] = "progress"
    stage: str
    done: int
    total: int


AnyEvent = Annotated[
    StatusEvent
    | NodeStartEvent
    | NodeEndEvent
    | NodeSkipEvent
    | TokenEvent
    | ThinkingEvent
    | ToolCallEvent
    | ToolResultEvent
    | BranchEvent
    | ApprovalRequestEvent
    | ApprovalDecisionEvent
    | ExpertStartEvent
    | ExpertEndEvent
    | EvalEvent
    | GuardrailEvent
    | BudgetEvent
    | ErrorEvent
    | DoneEvent
    | ProgressEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

CHANNEL_OF: dict[str, Channel] = {
    "status": "status",
    "done": "status",
    "error": "status",
    "progress": "status",
    "token": "token",
    "thinking": "token",
}


def parse_event(data: bytes | str) -> AnyEvent:
    return EVENT_ADAPTER.validate_json(data)
