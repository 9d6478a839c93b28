"""Task messages on the tasks work queue and the task state machine."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from shared.contract.base import Contract, utcnow

TaskStatus = Literal[
    "submitted", "running", "waiting", "done", "failed", "timeout", "rejected", "cancelled", "budget_exceeded"
]
TERMINAL: frozenset[str] = frozenset({"done", "failed", "timeout", "rejected", "cancelled", "budget_exceeded"})
# The terminal states a retry may reopen; a task ending in one keeps its checkpoint, which the
# retry resumes from.
RETRYABLE: frozenset[str] = frozenset({"failed", "timeout"})
# The terminal states in which a task ended without its answer through a fault rather than a
# person's decision: a chat answer is then an error message, a LangGraph run an `error` frame.
FAULTED: frozenset[str] = frozenset({"failed", "timeout", "budget_exceeded"})

# Allowed transitions; anything else is a repeated or out-of-order event and is ignored.
TRANSITIONS: dict[str, frozenset[str]] = {
    "submitted": frozenset({"running", *TERMINAL}),
    "running": frozenset({"waiting", *TERMINAL}),
    "waiting": frozenset({"running", *TERMINAL}),
    # A retry reopens a failed or timed-out task; it is the only way out of a terminal state.
    **{status: frozenset({"running"}) for status in RETRYABLE},
}


def can_transition(current: str, new: str, *, retry: bool = False) -> bool:
    if current in TERMINAL and not retry:
        return False
    return new in TRANSITIONS.get(current, frozenset())


class TaskOptions(Contract):
    token_budget: int | None = Field(default=None, ge=1)
    timeout_s: float | None = Field(default=None, gt=0, le=86_400)
    model: str | None = None


class TaskMessage(Contract):
    """Published on `P.tasks.submit` with `Nats-Msg-Id` = task id (or `<id>:retry:<n>`)."""

    task_id: str
    user_id: str
    dsl: dict[str, Any]
    input: dict[str, Any] = Field(default_factory=dict)
    options: TaskOptions = Field(default_factory=TaskOptions)
    session_id: str | None = None
    submitted_at: datetime = Field(default_factory=utcnow)
    # Set by the gateway's tier-1 guardrail when the input is neither clean nor blocked.
    guardrail_grey: list[str] = Field(default_factory=list)
    retry: int = 0
    # The gateway found `dsl` valid (`shared.contract.validate`) before publishing it: a
    # dispatcher builds its plan without checking every rule again (one validation per document).
    dsl_checked: bool = False


class ResumeMessage(Contract):
    """Published on `P.tasks.resume` with `Nats-Msg-Id` = `<task_id>:resume:<node_id>`."""

    task_id: str
    node_id: str
    decision: Literal["approve", "reject", "timeout"]
    by: str
    comment: str | None = None
    # An approved high-risk tool call runs with these arguments instead of the model's (an edit).
    args: dict[str, Any] | None = None


class CancelMessage(Contract):
    """Core publish on `P.tasks.cancel.<task_id>`."""

    task_id: str
    by: str
    reason: str = "cancelled by user"
