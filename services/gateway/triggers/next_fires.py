"""The next fire times of a schedule, for its views: a `cron` read in its time zone as the server
reads it (nats-server's `parseCron` walks local wall-clock fields), so a daily 09:00 in
Europe/Berlin stays at 09:00 local across a DST change; a local time the spring change skips does
not fire that day (the server finds no such wall-clock time and moves to the next day), and one the
autumn change repeats fires in both passes. Pure: no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import CroniterError, croniter

from services.gateway.triggers.timing import Timing, every_seconds

# The macros as 6-field expressions (seconds first), the form the rest of this module reads.
_MACROS = {
    "@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}


def cron_error(cron: str) -> str | None:
    """Why a 6-field cron (already of the right shape) has no fire times, or None."""
    try:
        croniter(_MACROS.get(cron.strip(), cron.strip()), datetime.now(UTC), second_at_beginning=True)
    except (CroniterError, ValueError, KeyError) as exc:
        return f"`cron`: {exc}"
    return None


def _on_the_fields(expanded: list[list[Any]], t: datetime) -> bool:
    """Whether `t`'s local hour, minute and second are ones the cron names (croniter's expanded
    fields, seconds moved last: minute, hour, day, month, weekday, second)."""
    minute, hour, second = expanded[0], expanded[1], expanded[5]
    return all(field == ["*"] or value in field for field, value in ((hour, t.hour), (minute, t.minute),
                                                                     (second, t.second)))


def next_fires(timing: Timing, after: datetime, count: int = 5, anchor: datetime | None = None,
               end_at: datetime | None = None) -> list[datetime]:  # fmt: skip
    """Up to `count` fire times strictly after `after`. `anchor`: when an `every` schedule was
    defined (its fires fall at anchor + k·interval); `end_at`: none after it."""
    out: list[datetime] = []
    if timing.at is not None:
        out = [timing.at.astimezone(UTC)] if timing.at > after else []
    elif timing.every is not None:
        step = timedelta(seconds=every_seconds(timing.every))
        start = anchor or after
        k = max(1, int((after - start) / step) + 1)
        out = [start + step * (k + i) for i in range(count)]
        out = [t for t in out if t > after][:count]
    elif timing.cron is not None:
        zone = ZoneInfo(timing.timezone)
        it = croniter(_MACROS.get(timing.cron.strip(), timing.cron.strip()), after.astimezone(zone),
                      second_at_beginning=True)
        for _ in range(4 * count + 8):  # a skipped time costs one step; bounded all the same
            t = it.get_next(datetime)
            # croniter moves a wall-clock time the spring change skips to the first instant
            # after it (03:00 for 02:30); the server does not fire then: left out.
            # (compared in UTC: Python compares two times of one zone by their wall clocks)
            if _on_the_fields(it.expanded, t) and (not out or t.astimezone(UTC) > out[-1].astimezone(UTC)):
                out.append(t)
            if len(out) == count:
                break
    if end_at is not None:
        out = [t for t in out if t <= end_at]
    return out
