"""A schedule's next fire times: a cron read in its time zone keeps local time across DST
changes both ways, a local time the spring change skips fires at the first instant after it,
`every` falls on its anchor's grid, `at` once, and `end_at` cuts the list."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from services.gateway.triggers.next_fires import cron_error, next_fires
from services.gateway.triggers.timing import Timing

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
HOURLY_BERLIN = Timing(cron="0 0 * * * *", timezone="Europe/Berlin")


def _utc(times: list[datetime]) -> list[datetime]:
    """In UTC: Python subtracts two times of one zone by their wall clocks."""
    return [t.astimezone(UTC) for t in times]


def test_daily_nine_local_stays_nine_across_spring_and_autumn_changes() -> None:
    spring = next_fires(Timing(cron="0 0 9 * * *", timezone="Europe/Berlin"),
                        datetime(2027, 3, 27, 12, tzinfo=UTC), 3)
    assert [t.astimezone(BERLIN).hour for t in spring] == [9, 9, 9]
    assert [t.astimezone(UTC).hour for t in spring] == [7, 7, 7]  # 2027-03-28 is already summer time
    autumn = next_fires(Timing(cron="0 0 9 * * *", timezone="America/New_York"),
                        datetime(2027, 11, 6, 0, tzinfo=UTC), 3)
    assert [t.astimezone(NEW_YORK).hour for t in autumn] == [9, 9, 9]
    utc_hours = [t.astimezone(UTC).hour for t in autumn]
    assert utc_hours == [13, 14, 14]  # EDT on the 6th, EST from the 7th
    assert autumn[1].astimezone(UTC) - autumn[0].astimezone(UTC) == timedelta(hours=25)  # (aware, same-zone
    # subtraction in Python is wall-clock)


def test_a_time_the_spring_change_skips_does_not_fire_that_day_as_the_server_reads_it() -> None:
    """nats-server walks wall-clock fields: on 2027-03-28 Berlin has no 02:30, so the next 02:30
    is the 29th's (croniter alone would list 03:00 on the 28th, a fire that never comes)."""
    got = next_fires(Timing(cron="0 30 2 * * *", timezone="Europe/Berlin"), datetime(2027, 3, 27, 12, tzinfo=UTC), 3)
    assert [(t.day, t.hour, t.minute) for t in (x.astimezone(BERLIN) for x in got)] == [
        (29, 2, 30), (30, 2, 30), (31, 2, 30)]
    # an hour range over the gap keeps the hours that exist, each once
    got = next_fires(Timing(cron="0 30 1-3 * * *", timezone="Europe/Berlin"), datetime(2027, 3, 27, 23, tzinfo=UTC), 3)
    assert [t.astimezone(UTC).isoformat() for t in got] == [
        "2027-03-28T00:30:00+00:00", "2027-03-28T01:30:00+00:00", "2027-03-28T23:30:00+00:00"]  # 01:30 CET,
    # 03:30 CEST, then 01:30 CEST on the 29th
    hourly = _utc(next_fires(HOURLY_BERLIN, datetime(2027, 3, 27, 23, 30, tzinfo=UTC), 3))
    assert [(b - a) for a, b in itertools.pairwise(hourly)] == [timedelta(hours=1)] * 2


def test_a_time_the_autumn_change_repeats_fires_in_both_passes() -> None:
    got = next_fires(Timing(cron="0 30 2 * * *", timezone="Europe/Berlin"), datetime(2027, 10, 30, 23, tzinfo=UTC), 3)
    assert [t.astimezone(UTC).isoformat() for t in got] == [
        "2027-10-31T00:30:00+00:00", "2027-10-31T01:30:00+00:00", "2027-11-01T01:30:00+00:00"]
    assert [t.astimezone(BERLIN).utcoffset() for t in got[:2]] == [timedelta(hours=2), timedelta(hours=1)]
    hourly = _utc(next_fires(HOURLY_BERLIN, datetime(2027, 10, 30, 23, 30, tzinfo=UTC), 4))
    assert [(b - a) for a, b in itertools.pairwise(hourly)] == [timedelta(hours=1)] * 3  # 02:00 twice


def test_every_falls_on_its_anchors_grid_and_at_fires_once() -> None:
    anchor = datetime(2027, 1, 1, 12, tzinfo=UTC)
    got = next_fires(Timing(every="10s"), anchor + timedelta(seconds=25), 3, anchor=anchor)
    assert got == [anchor + timedelta(seconds=s) for s in (30, 40, 50)]
    when = datetime(2027, 1, 2, tzinfo=UTC)
    assert next_fires(Timing(at=when), anchor, 5) == [when]
    assert next_fires(Timing(at=when), when, 5) == []
    assert next_fires(Timing(every="10s"), anchor, 5, anchor=anchor, end_at=anchor + timedelta(seconds=20)) == [
        anchor + timedelta(seconds=10), anchor + timedelta(seconds=20)]


def test_macros_read_and_out_of_range_fields_are_named() -> None:
    assert cron_error("@daily") is None
    assert next_fires(Timing(cron="@hourly"), datetime(2027, 1, 1, 12, 30, tzinfo=UTC), 1) == [
        datetime(2027, 1, 1, 13, tzinfo=UTC)]
    err = cron_error("0 61 * * * *")
    assert err is not None and err.startswith("`cron`")
