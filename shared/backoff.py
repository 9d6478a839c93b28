"""Exponential backoff: the one way Agentix spaces out its attempts at something that may pass by
itself — a JetStream election, NATS not up yet, an MCP server restarting, a rate-limited model, an
ingestion job whose parser crashed, a service that exited.

A `Backoff` is the schedule: the wait after the first failure is `first_s`, each further failure
in a row doubles it, never beyond `max_s`. `jitter` draws that share of each wait at random, so
replicas that failed together do not all try again at the same moment. Its budget says when to
stop: `attempts` (the first included) and `within_s` (no wait that would end later than this
after the first attempt). `Retries` follows one run of attempts through it; a caller whose
attempts are counted elsewhere (a redelivery's number, a restart count) asks `delay(n)` itself.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]
Uniform = Callable[[float, float], float]  # a number drawn between its two bounds


@dataclass(frozen=True)
class Backoff:
    """`first_s` doubling to `max_s`; `jitter` in [0, 1] (0.5: the second half of each wait is
    random); `attempts` None and `within_s` infinite: no limit."""

    first_s: float
    max_s: float
    jitter: float = 0.0
    attempts: int | None = None
    within_s: float = math.inf

    def __post_init__(self) -> None:
        if not 0 < self.first_s <= self.max_s:
            raise ValueError(f"a backoff needs 0 < first_s <= max_s (got {self.first_s:g} and {self.max_s:g})")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter is a share of the wait, between 0 and 1 (got {self.jitter:g})")
        if self.attempts is not None and self.attempts < 1:
            raise ValueError(f"a budget of {self.attempts} attempts allows none")
        if self.within_s < 0:
            raise ValueError(f"within_s cannot be negative (got {self.within_s:g})")

    def delay(self, failures: int, uniform: Uniform = random.uniform) -> float:
        """The wait after `failures` + 1 failures in a row: `first_s` after the first (0), twice
        as long after each further one, at most `max_s`; with `jitter`, that share of it drawn
        by `uniform`."""
        if failures < 0:
            raise ValueError(f"failures cannot be negative (got {failures})")
        try:
            grown = self.first_s * 2.0**failures
        except OverflowError:  # doubled a thousand times: long past the cap
            grown = math.inf
        ceiling = min(grown, self.max_s)
        if not self.jitter:
            return ceiling
        drawn = ceiling * self.jitter
        return ceiling - drawn + uniform(0.0, drawn)

    def start(self, clock: Clock = time.monotonic) -> Retries:
        """A run of attempts beginning now (its first attempt is about to be made)."""
        return Retries(self, clock)


class Retries:
    """One run of attempts under a `Backoff`. After each failed attempt, `next_wait()` is the
    wait before the next one, or None when the budget allows no other."""

    def __init__(self, backoff: Backoff, clock: Clock = time.monotonic) -> None:
        self.backoff = backoff
        self._clock = clock
        self.started = clock()
        self.failures = 0  # failed attempts so far

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self.started

    def next_wait(self) -> float | None:
        """Counts a failed attempt; the wait before the next one, or None when the attempts are
        spent or the wait would end past `within_s`."""
        self.failures += 1
        budget = self.backoff
        if budget.attempts is not None and self.failures >= budget.attempts:
            return None
        wait = budget.delay(self.failures - 1)
        if self._clock() + wait > self.started + budget.within_s:
            return None
        return wait
