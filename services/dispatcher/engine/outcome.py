"""How a run ends: the outcome `Runner.run` returns, and `Stop`, which ends it early."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from services.dispatcher.engine.checkpoint import Checkpoint
from shared.contract.models import Usage
from shared.contract.task import TERMINAL

Outcome = Literal["done", "waiting", "failed", "timeout", "rejected", "cancelled", "budget_exceeded"]


@dataclass
class RunOutcome:
    status: Outcome
    output: dict[str, Any] | None = None
    error: str | None = None
    code: str | None = None
    waiting: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    checkpoint: Checkpoint | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def of(cls, cp: Checkpoint) -> RunOutcome:
        """The outcome a checkpoint records."""
        return cls(status=cp.status, output=cp.output, error=cp.error, code=cp.code,  # type: ignore[arg-type]
                   waiting=sorted(cp.waiting), usage=cp.usage, checkpoint=cp)


class Stop(Exception):  # control flow, not a failure: deliberately not an AgentixError
    """Ends the run with a terminal status (failure, rejection, budget, timeout, cancel)."""

    def __init__(self, status: Outcome, error: str | None, code: str | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.code = code
