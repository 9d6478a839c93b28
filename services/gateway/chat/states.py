"""A chat run's state machine, and how its task's status moves it.

`queued → planning | running`, `planning → awaiting_approval`, `awaiting_approval → running |
cancelled`, `running → awaiting_approval | succeeded | failed | cancelled | interrupted |
budget_exceeded`. A run can also fail, be cancelled or interrupted, or exhaust its budget while
queued or planning (a model error in the plan call, a Stop before its turn came). Terminal states
never change.

`move` is the one place a run's state is written: a move the machine does not allow is refused
(and logged), never written."""

from __future__ import annotations

import logging
from typing import Final

from services.gateway.chat.tables import ChatRun
from services.gateway.tables import now

log = logging.getLogger("agentix.gateway.chat")

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


def path(current: str, new: str, mode: str) -> list[str] | None:
    """The fewest legal moves that take a run in `mode` from `current` to `new` (the states passed
    through, `new` last; [] when it is there already), or None when the machine has no way there.
    Only a plan run passes through `planning`."""
    trails: dict[str, list[str]] = {current: []}
    frontier = [current]
    while frontier and new not in trails:
        reached = []
        for state in frontier:
            for step in sorted(RUN_TRANSITIONS.get(state, ())):
                if step not in trails and (step != "planning" or mode == "plan"):
                    trails[step] = [*trails[state], step]
                    reached.append(step)
        frontier = reached
    return trails.get(new)


def move(run: ChatRun, new: str) -> bool:
    """Move `run` to `new` if the machine allows it (a terminal state stamps `ended_at`); False
    when nothing changed: it is there already, or the move is refused (logged)."""
    if run.state == new:
        return False
    if not can_move(run.state, new):
        # A late or repeated event of an ended run is ordinary (at least once, out of order):
        # only a refused move of a run still going says something is wrong.
        level = logging.INFO if run.state in RUN_TERMINAL else logging.WARNING
        log.log(level, "chat run %s: refused the move %s → %s", run.id, run.state, new)
        return False
    run.state = new
    if new in RUN_TERMINAL:
        run.ended_at = now()
    return True


def state_for(task_status: str, run_state: str, mode: str, stop_reason: str | None) -> str | None:
    """The run state a task status means for this run now; None when it means no change."""
    if task_status in _TASK_ENDINGS:
        ended = _TASK_ENDINGS[task_status]
        return "interrupted" if ended == "cancelled" and stop_reason in ("interrupt", "rollback") else ended
    if task_status == "waiting":
        return "awaiting_approval"
    if task_status == "running":
        # A plan run plans until its plan is approved (a takeover's `running` while it plans
        # changes nothing); after the approval it runs the plan.
        return "planning" if mode == "plan" and run_state in ("queued", "planning") else "running"
    return None


def follow(run: ChatRun, new: str) -> bool:
    """Move the run to `new`, the state its task is in. The queue's batches are applied on every
    gateway replica at once, and a failed one again later, so the status events before the one
    that says `new` may not have been applied yet: the moves they skipped are made on the way,
    each one checked by the machine. False when nothing changed (there already, or refused)."""
    steps = path(run.state, new, run.mode)
    if steps is None:
        return move(run, new)  # refused, and logged
    if len(steps) > 1:
        log.info("chat run %s is %s before its moves %s were recorded", run.id, new, " → ".join(steps[:-1]))
    for step in steps:
        move(run, step)
    return bool(steps)
