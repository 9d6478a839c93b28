"""A chat run's state machine, and how its task's status moves it.

`queued → planning | running`, `planning → awaiting_approval`, `awaiting_approval → running |
cancelled`, `running → awaiting_approval | succeeded | failed | cancelled | interrupted |
budget_exceeded`. A run can also fail, be cancelled or interrupted, or exhaust its budget while
queued or planning (a model error in the plan call, a Stop before its turn came). Terminal states
never change."""

from __future__ import annotations

from typing import Final

RUN_TERMINAL: Final = frozenset({"succeeded", "failed", "cancelled", "interrupted", "budget_exceeded"})
_ENDINGS: Final = frozenset({"failed", "cancelled", "interrupted", "budget_exceeded"})
RUN_TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    "queued": frozenset({"planning", "running", *_ENDINGS}),
    "planning": frozenset({"awaiting_approval", *_ENDINGS}),
    "awaiting_approval": frozenset({"running", *_ENDINGS}),
    "running": frozenset({"awaiting_approval", "succeeded", *_ENDINGS}),
}
# A task's terminal status → the run's (a `rejected` plan ends the run cancelled).
_TASK_ENDINGS: Final = {
    "done": "succeeded",
    "failed": "failed",
    "timeout": "failed",
    "rejected": "cancelled",
    "cancelled": "cancelled",
    "budget_exceeded": "budget_exceeded",
}


def can_move(current: str, new: str) -> bool:
    return new in RUN_TRANSITIONS.get(current, frozenset())


def state_for(task_status: str, run_state: str, mode: str, stop_reason: str | None) -> str | None:
    """The run state a task status means for this run now; None when it means no change."""
    if task_status in _TASK_ENDINGS:
        ended = _TASK_ENDINGS[task_status]
        return "interrupted" if ended == "cancelled" and stop_reason in ("interrupt", "rollback") else ended
    if task_status == "waiting":
        return "awaiting_approval"
    if task_status == "running":
        # A plan run plans until its plan is approved; after the approval it runs the plan.
        return "planning" if mode == "plan" and run_state == "queued" else "running"
    return None
