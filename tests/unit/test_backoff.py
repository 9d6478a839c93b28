"""The one backoff: waits that double from the first to the cap, jitter inside its bounds, and a
budget of attempts or of time that ends a run of retries."""

from __future__ import annotations

import math
import random

import pytest

from shared.backoff import Backoff


class Clock:
    """A clock the test moves: a budget is checked against it, never against wall time."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_waits_double_from_the_first_and_stop_at_the_cap() -> None:
    backoff = Backoff(first_s=0.05, max_s=1.0)
    assert [backoff.delay(n) for n in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.delay(10_000) == 1.0  # doubled past any float: still the cap


def test_the_numbers_of_each_place_that_waits() -> None:
    # Ingest redelivery: 1 s after the first failed delivery, doubling to 30 s.
    assert [Backoff(1.0, 30.0).delay(a - 1) for a in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    # MCP reconnects: 0.2 s doubling to 5 s.
    assert [Backoff(0.2, 5.0).delay(n) for n in range(6)] == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 5.0])


def test_jitter_draws_its_share_of_each_wait_at_random_within_bounds() -> None:
    half = Backoff(first_s=0.5, max_s=8.0, jitter=0.5)
    # The bounds, with the draw at either end: the second half of the wait is random.
    assert half.delay(0, uniform=lambda low, high: low) == 0.25
    assert half.delay(0, uniform=lambda low, high: high) == 0.5
    assert half.delay(5, uniform=lambda low, high: low) == 4.0  # the cap, halved
    rng = random.Random(7)
    for n in range(8):
        ceiling = min(0.5 * 2**n, 8.0)
        draws = [half.delay(n, uniform=rng.uniform) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in draws)
        assert len(set(draws)) > 1  # random indeed
    full = Backoff(first_s=1.0, max_s=1.0, jitter=1.0)
    assert full.delay(3, uniform=lambda low, high: low) == 0.0


def test_an_attempt_budget_counts_the_first_attempt() -> None:
    retries = Backoff(first_s=0.5, max_s=8.0, attempts=3).start(Clock())
    assert retries.next_wait() == 0.5  # after the first attempt
    assert retries.next_wait() == 1.0  # after the second
    assert retries.next_wait() is None  # the third was the last
    assert retries.failures == 3


def test_a_time_budget_refuses_a_wait_that_would_end_past_it() -> None:
    clock = Clock()
    retries = Backoff(first_s=1.0, max_s=4.0, within_s=6.0).start(clock)
    assert retries.next_wait() == 1.0
    clock.now += 1.0
    assert retries.next_wait() == 2.0  # ends at 3 s
    clock.now += 2.0
    assert retries.elapsed_s == 3.0
    assert retries.next_wait() is None  # 4 s more would end at 7 s, past 6 s
    assert retries.failures == 3


def test_no_budget_is_no_limit_and_zero_time_allows_no_retry() -> None:
    clock = Clock()
    endless = Backoff(first_s=0.1, max_s=2.0).start(clock)
    for _ in range(1000):
        wait = endless.next_wait()
        assert wait is not None
        clock.now += wait
    assert endless.backoff.within_s == math.inf
    assert Backoff(first_s=0.1, max_s=2.0, within_s=0).start(clock).next_wait() is None


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"first_s": 0, "max_s": 1}, "0 < first_s <= max_s"),
    ({"first_s": 2, "max_s": 1}, "0 < first_s <= max_s"),
    ({"first_s": 1, "max_s": 2, "jitter": 1.5}, "between 0 and 1"),
    ({"first_s": 1, "max_s": 2, "attempts": 0}, "allows none"),
    ({"first_s": 1, "max_s": 2, "within_s": -1}, "cannot be negative"),
])
def test_a_schedule_that_makes_no_sense_is_refused_when_made(kwargs: dict[str, float], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Backoff(**kwargs)
