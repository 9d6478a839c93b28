"""What the runner needs from the outside world, as Protocols. The dispatcher implements them on
NATS (KV checkpoints, EventPublisher, tool requests); `engine.memory` has in-process versions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from services.dispatcher.engine.checkpoint import Checkpoint
from services.dispatcher.llm.api import (
    LLM,
    AgentRunner,
    BudgetExceeded,
    LLMError,
    TokenBudget,
    ToolCaller,
)
from shared.contract.base import utcnow
from shared.contract.events import EventBase

__all__ = [
    "LLM",
    "AgentRunner",
    "BudgetExceeded",
    "CheckpointStore",
    "Decision",
    "EventSink",
    "LLMError",
    "TokenBudget",
    "ToolCaller",
]


class CheckpointStore(Protocol):
    """May also have `async flush()`: then `save` may be pipelined, and the runner calls
    `flush` before it returns a waiting or terminal outcome."""

    async def load(self, task_id: str) -> Checkpoint | None: ...

    async def save(self, checkpoint: Checkpoint) -> None: ...

    async def delete(self, task_id: str) -> None: ...


class EventSink(Protocol):
    """Publishes one task's events; assigns `n` (the last assigned is `n`) and `ts`."""

    @property
    def n(self) -> int: ...

    async def emit(self, event: EventBase) -> Any: ...


@dataclass(frozen=True)
class Decision:
    """An approver's answer for one waiting approval node (from a ResumeMessage). `timeout` is
    what the approval's own deadline produces."""

    node_id: str
    decision: Literal["approve", "reject", "timeout"]
    by: str
    comment: str | None = None
    at: datetime = field(default_factory=utcnow)
    args: dict[str, Any] | None = None  # an approved tool call's edited arguments

    def output(self) -> dict[str, Any]:
        return {"decision": self.decision, "comment": self.comment, "by": self.by, "at": self.at.isoformat()}
