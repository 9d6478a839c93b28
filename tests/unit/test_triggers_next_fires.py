"""A schedule's next fire times: a cron read in its time zone keeps local time across DST
changes both ways, a local time the spring change skips fires at the first instant after it,
`every` falls on its anchor's grid, `at` once, and `end_at` cuts the list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from services.gateway.triggers.next_fires import cron_error, next_fires
from services.gateway.triggers.timing import Timing

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


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


def test_a_time_the_spring_change_skips_fires_once_at_the_first_instant_after() -> None:
    got = next_fires(Timing(cron="0 30 2 * * *", timezone="Europe/Berlin"), datetime(2027, 3, 27, 12, tzinfo=UTC), 3)
    local = [t.astimezone(BERLIN) for t in got]
    assert local[0].date().isoformat() == "2027-03-28" and (local[0].hour, local[0].minute) == (3, 0)
    assert [(t.day, t.hour, t.minute) for t in local[1:]] == [(29, 2, 30), (30, 2, 30)]


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
