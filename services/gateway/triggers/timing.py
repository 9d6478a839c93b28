"""When a schedule fires — `cron` (6 fields, seconds first), `every` or `at`, with a time zone —
as the `Nats-Schedule*` headers of its definition message. Pure: no I/O. The server is the final
judge of a cron expression; what is refused here is refused with the field's name."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, model_validator

_EVERY = re.compile(r"^(?:\d+h)?(?:\d+m)?(?:\d+s)?$")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-?]+$")
_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


class Timing(BaseModel):
    """Exactly one of `cron`, `every`, `at`; `timezone` (IANA) applies to `cron`."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(default=None, description="6 fields: second minute hour day month weekday")
    every: str | None = Field(default=None, description="an interval such as 30s, 5m, 1h30m (at least 1s)")
    at: datetime | None = Field(default=None, description="one fire at this instant (RFC 3339 with an offset)")
    timezone: str = Field(default="UTC", description="IANA zone the cron fields are read in")

    @model_validator(mode="after")
    def _one_kind(self) -> Timing:
        given = [k for k in ("cron", "every", "at") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of `cron`, `every`, `at`")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"`timezone`: unknown time zone {self.timezone!r}") from None
        if self.cron is not None:
            _check_cron(self.cron)
        if self.every is not None:
            _check_every(self.every)
        if self.at is not None and self.at.tzinfo is None:
            raise ValueError("`at` needs a UTC offset (RFC 3339), e.g. 2027-01-01T09:00:00+01:00")
        if self.timezone != "UTC" and self.cron is None:
            raise ValueError("`timezone` applies to `cron` only")
        return self

    def header(self) -> str:
        """The `Nats-Schedule` value."""
        if self.cron is not None:
            return self.cron.strip()
        if self.every is not None:
            return f"@every {self.every}"
        assert self.at is not None
        return "@at " + self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def headers(self, target: str) -> dict[str, str]:
        """The headers of the definition message whose fires go to `target`."""
        hdrs = {"Nats-Schedule": self.header(), "Nats-Schedule-Target": target}
        if self.cron is not None and self.timezone != "UTC":
            hdrs["Nats-Schedule-Time-Zone"] = self.timezone
        return hdrs


def _check_cron(cron: str) -> None:
    expr = cron.strip()
    if expr in _MACROS:
        return
    fields = expr.split()
    if len(fields) != 6:
        raise ValueError(f"`cron` needs 6 fields (second minute hour day month weekday), got {len(fields)}")
    bad = [f for f in fields if not _CRON_FIELD.match(f)]
    if bad:
        raise ValueError(f"`cron`: field {bad[0]!r} is not a cron field")


def _check_every(every: str) -> None:
    if not every or not _EVERY.match(every):
        raise ValueError(f"`every`: {every!r} is not an interval like 30s, 5m, 1h30m")
    if every_seconds(every) < 1:
        raise ValueError("`every` must be at least 1s")


def every_seconds(every: str) -> int:
    """The interval in seconds (`every` already checked)."""
    total = 0
    for amount, unit in re.findall(r"(\d+)([hms])", every):
        total += int(amount) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total
