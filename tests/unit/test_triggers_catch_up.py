"""A fire on time runs; a catch-up fire runs under `once` and is skipped, with why, under `skip`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.gateway.triggers.catch_up import LATE_AFTER, judge, parse_next

T = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)


def test_on_time_first_and_late_fires() -> None:
    assert judge(T, None, "skip").run
    assert judge(T + LATE_AFTER, T, "skip") == judge(T, T, "skip")
    late = T + timedelta(hours=2)
    assert judge(late, T, "once").run and judge(late, T, "once").late
    skipped = judge(late, T, "skip")
    assert not skipped.run and skipped.reason is not None and "catch_up: skip" in skipped.reason


def test_next_header_in_a_zone_and_one_shot() -> None:
    assert parse_next("2027-03-28T03:00:00+02:00") == T + timedelta(hours=0)
    assert parse_next("2027-03-28T01:00:00Z") == T
    assert parse_next("purge") is None and parse_next(None) is None and parse_next("soon") is None
