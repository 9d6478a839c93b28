"""Every event of a task (and of an ingestion job), as published on
`P.events.<id>.<channel>` and served over SSE. `n` is a per-id counter so readers can detect gaps."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

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
    # On `waiting`: what the task spent so far. Its `done` comes only after the decision, and a
    # parked task would otherwise show no usage although its nodes ran.
    usage: Usage | None = None


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


class ThinkingStartEvent(EventBase):
    """A block of the model's reasoning begins (its text follows as `thinking.delta`)."""

    type: Literal["thinking.start"] = "thinking.start"


class ThinkingEvent(EventBase):
    """A piece of the model's reasoning, as it streams."""

    type: Literal["thinking.delta"] = "thinking.delta"
    text: str


class ThinkingEndEvent(EventBase):
    """The reasoning block ends (the answer's tokens, a tool call, or the end of the call follows)."""

    type: Literal["thinking.end"] = "thinking.end"


class ToolInputEvent(EventBase):
    """A piece of the arguments of a tool call the model is still writing (when the provider
    streams them); `tool.call` follows with the complete arguments just before the call runs."""

    type: Literal["tool.input"] = "tool.input"
    call_id: str
    tool: str
    delta: str


class ToolCallEvent(EventBase):
    type: Literal["tool.call"] = "tool.call"
    call_id: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    # True: a call of one of the caller's own tools (`client_tools`), not run here — it ends the
    # node. Left out (None) for the agent's own tools, so their events stay as they were.
    client: bool | None = None


class ToolResultEvent(EventBase):
    type: Literal["tool.result"] = "tool.result"
    call_id: str
    ok: bool
    duration_ms: float
    result_preview: str | None = None
    # The result itself (JSON), when its JSON text is at most RESULT_CHARS; else only the preview.
    result: Any = None
    error: str | None = None


RESULT_CHARS = 8_000  # the largest tool result an event carries whole


class BranchEvent(EventBase):
    type: Literal["branch"] = "branch"
    handle: str


class ApprovalRequestEvent(EventBase):
    """A node waits for a person's decision: an `approval` node, or an agent's high-risk tool call
    (then `call_id`, `tool` and `args` — as the model wrote them — show the call)."""

    type: Literal["approval.request"] = "approval.request"
    message: str
    timeout_s: float | None = None
    call_id: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None


class PlanEvent(EventBase):
    """The plan an approval node asks a person to decide on (its `plan` config), just before its
    `approval.request`: a chat run's plan in `plan` mode."""

    type: Literal["plan"] = "plan"
    steps: list[Any] = Field(default_factory=list)


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
    # The error's code, as the terminal `status` before it says: `done` alone ends the record.
    code: str | None = None
    usage: Usage | None = None
    # The run of the task it ends, when the task was retried (a late `done` of an earlier run
    # must not end the retry's record).
    retry: int | None = None
    # Ingestion jobs end with these instead of `output`.
    document_id: str | None = None
    chunks: int | None = None


class QueuedEvent(EventBase):
    """A chat run waiting behind `position` earlier runs of its conversation (its task is
    published when its turn comes; `status` events follow from then on)."""

    type: Literal["queued"] = "queued"
    position: int = Field(ge=1)


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
    | ThinkingStartEvent
    | ThinkingEvent
    | ThinkingEndEvent
    | ToolInputEvent
    | ToolCallEvent
    | ToolResultEvent
    | BranchEvent
    | ApprovalRequestEvent
    | PlanEvent
    | ApprovalDecisionEvent
    | ExpertStartEvent
    | ExpertEndEvent
    | EvalEvent
    | GuardrailEvent
    | BudgetEvent
    | ErrorEvent
    | DoneEvent
    | QueuedEvent
    | ProgressEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

CHANNEL_OF: dict[str, Channel] = {
    "status": "status",
    "done": "status",
    "error": "status",
    "progress": "status",
    "queued": "status",
    "token": "token",
    "thinking.start": "token",
    "thinking.delta": "token",
    "thinking.end": "token",
    "tool.input": "token",
}


def parse_event(data: bytes | str) -> AnyEvent:
    return EVENT_ADAPTER.validate_json(data)


# How a task's event log ends is part of the contract (every reader relies on `done` coming
# last), so it is written once here, over any sink; it does no I/O of its own.
class TaskEvents(Protocol):
    """Where a task's events go: the bus's `EventPublisher`, or a wrapper around one (redaction). A
    sink that also has `async flush()` is flushed by `finish_task`."""

    async def emit(self, event: EventBase) -> Any: ...


async def finish_task(
    events: TaskEvents,
    task_id: str,
    status: str,
    *,
    error: str | None = None,
    code: str | None = None,
    output: Any = None,
    usage: Usage | None = None,
    retry: int = 0,
) -> None:
    """End a task's event log in a terminal `status`: the `status` event (what a client reading
    only the status channel sees end), then the `done` event with the result (what ends every
    SSE stream, and what the gateway's recorder ends the record by: status, output or error and
    usage in one write), then wait until both are stored, so a caller that acks or records
    afterwards never loses the end."""
    await events.emit(StatusEvent(task_id=task_id, status=status, error=error, code=code))
    await events.emit(DoneEvent(task_id=task_id, status=status, output=output, error=error, code=code, usage=usage,
                                retry=retry or None))
    flush = getattr(events, "flush", None)
    if flush is not None:
        await flush()
