"""Is a fire on time, or the one the server makes up for periods missed while the whole cluster
was down (started again, the server fires a missed schedule once, at once)? Each fire names the
next one's time (`Nats-Schedule-Next`); a fire that comes well after the time its predecessor
named is a catch-up fire, and the schedule's `catch_up` says whether it runs: `once` runs it,
`skip` records it skipped. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

CatchUp = Literal["skip", "once"]
# How late a fire may be and still be on time: a leader change of the schedules stream takes a few
# seconds (docs/FAULTS.md), and a fire delayed by one is not a missed period.
LATE_AFTER = timedelta(seconds=15)


@dataclass(frozen=True)
class Verdict:
    run: bool
    late: bool
    reason: str | None = None  # why a fire starts nothing


def parse_next(next_at: str | None) -> datetime | None:
    """A fire's `Nats-Schedule-Next` (RFC 3339, in the schedule's zone); None for a one-shot."""
    if not next_at or next_at == "purge":
        return None
    try:
        return datetime.fromisoformat(next_at.replace("Z", "+00:00"))
    except ValueError:
        return None


def judge(fired_at: datetime, expected_at: datetime | None, policy: CatchUp,
          late_after: timedelta = LATE_AFTER) -> Verdict:  # fmt: skip
    """`expected_at`: the time the schedule's previous fire named (None: its first fire)."""
    if expected_at is None or fired_at - expected_at <= late_after:
        return Verdict(run=True, late=False)
    if policy == "once":
        return Verdict(run=True, late=True)
    missed = fired_at - expected_at
    return Verdict(run=False, late=True,
                   reason=f"missed while the cluster was down ({int(missed.total_seconds())} s late; catch_up: skip)")
