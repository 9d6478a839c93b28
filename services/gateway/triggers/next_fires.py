"""The next fire times of a schedule, for its views: a `cron` read in its time zone (the server
fires by its own reading of it), so a daily 09:00 in Europe/Berlin stays at 09:00 local across a DST
change and a time the change skips fires at the first instant after it. Pure: no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
        out = [it.get_next(datetime) for _ in range(count)]
    if end_at is not None:
        out = [t for t in out if t <= end_at]
    return out
