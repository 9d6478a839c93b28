"""The progress of one agent node's tool loop, kept in the task's checkpoint (`Checkpoint.agents`).

A ReAct loop can stop half-way: a high-risk tool call waits for a person's approval (the task
parks), or its dispatcher dies. Either way the node runs again later, maybe on another dispatcher;
with this state it continues where it was — the conversation with the model so far, the tool
calls of the current step and which of them already have a result — so no finished tool call is
made twice and no model turn is asked again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.contract.models import Usage


class PendingCall(BaseModel):
    """A tool call the model made in the current step."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str  # the function name the model called
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None


class ToolDecision(BaseModel):
    """A person's answer to the approval of one high-risk call."""

    model_config = ConfigDict(extra="ignore")

    call_id: str
    decision: Literal["approve", "reject"]
    by: str
    comment: str | None = None
    args: dict[str, Any] | None = None  # approved with these arguments instead of the model's (an edit)


class AgentLoop(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messages: list[dict[str, Any]] = Field(default_factory=list)  # the model conversation so far
    steps: int = 0  # model turns that called tools
    pending: list[PendingCall] = Field(default_factory=list)  # the current step's calls
    results: dict[str, str] = Field(default_factory=dict)  # call id → what the model will read
    awaiting: str | None = None  # the call id waiting for an approval
    decision: ToolDecision | None = None  # the answer to `awaiting`, once it came
    # Model usage of this node not yet counted in the task's usage (a park counts it).
    usage: Usage = Field(default_factory=Usage)


class CheckpointKeeper:
    """The `LoopKeeper` of one agent node: its state lives in `agents[node_id]` of the task's
    checkpoint, and `save` writes the whole checkpoint (`checkpoint`)."""

    def __init__(self, agents: dict[str, AgentLoop], node_id: str,
                 checkpoint: Callable[[], Awaitable[None]]) -> None:
        self._agents = agents
        self._node_id = node_id
        self._checkpoint = checkpoint

    @property
    def state(self) -> AgentLoop | None:
        return self._agents.get(self._node_id)

    async def save(self, state: AgentLoop) -> None:
        self._agents[self._node_id] = state
        await self._checkpoint()
