"""The checkpoint of one task: everything needed to resume it on any dispatcher.

Written after every node that asks a model, a tool or a person (and at every state change);
the start of a run and the nodes that only read the input and earlier outputs (`input`,
`branch`, `output`) go with the next write. Finished nodes (`done`, `skipped`, or
`failed` with `on_error: continue`) are never run again; their outputs are restored from here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from services.dispatcher.engine.agent_loop import AgentLoop
from shared.contract.base import utcnow
from shared.contract.models import Usage
from shared.errors import AgentixError

NodeStatus = Literal["done", "failed", "skipped", "waiting"]


class NodeState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: NodeStatus
    output: Any = None
    error: str | None = None
    code: str | None = None
    # A failure that the graph went past (`on_error: continue`): finished, output null.
    continued: bool = False

    @property
    def finished(self) -> bool:
        return self.status in ("done", "skipped") or (self.status == "failed" and self.continued)


class WaitingApproval(BaseModel):
    model_config = ConfigDict(extra="ignore")

    node_id: str
    message: str
    requested_at: datetime = Field(default_factory=utcnow)
    deadline: datetime | None = None
    # A high-risk tool call inside an agent's loop (not an `approval` node): which call, as shown.
    call_id: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None


class CheckpointTooLarge(AgentixError):
    """The serialized checkpoint would not fit in one message (NATS max_payload)."""

    code = "checkpoint_too_large"

    def __init__(self, task_id: str, size: int, limit: int) -> None:
        super().__init__(f"the checkpoint of task {task_id} would be {size} bytes, over the limit of {limit} "
                         "bytes (node outputs too large to keep)")
        self.size = size
        self.limit = limit


class Checkpoint(BaseModel):
    model_config = ConfigDict(extra="ignore")

    task_id: str
    status: str = "running"
    # The task as submitted (a TaskMessage dump): a resume or retry rebuilds the run from it.
    task: dict[str, Any] | None = None
    retry: int = 0
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    waiting: dict[str, WaitingApproval] = Field(default_factory=dict)
    # Agent nodes part-way through their tool loop (parked for a tool approval, or running when
    # the dispatcher died): their loop state, so they continue rather than start again.
    agents: dict[str, AgentLoop] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    budget_used: int = 0
    event_n: int = 0
    chain_revision: int | None = None
    # The pinned chain itself (a ModelChain dump; API keys stay encrypted): a dispatcher that
    # never saw this revision — started after a hot swap — resumes the task with it.
    chain: dict[str, Any] | None = None
    # The tier-2 guardrail allowed the input (a resume or retry does not ask again).
    guardrail_passed: bool = False
    prompt_versions: dict[str, int] = Field(default_factory=dict)
    prompts: dict[str, str] = Field(default_factory=dict)
    elapsed_s: float = 0.0
    output: Any = None
    error: str | None = None
    code: str | None = None
    started_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # Checked where it is serialized, so the store never sends (or half-sends) an oversize write.
    _max_bytes: int | None = PrivateAttr(default=None)

    def bound(self, max_bytes: int | None) -> Checkpoint:
        self._max_bytes = max_bytes
        return self

    def to_bytes(self) -> bytes:
        data = self.model_dump_json(exclude_defaults=True).encode()
        if self._max_bytes is not None and len(data) > self._max_bytes:
            raise CheckpointTooLarge(self.task_id, len(data), self._max_bytes)
        return data

    @classmethod
    def from_bytes(cls, data: bytes | str) -> Checkpoint:
        return cls.model_validate_json(data)

    def finished(self, node_id: str) -> bool:
        state = self.nodes.get(node_id)
        return state is not None and state.finished
