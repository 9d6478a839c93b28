"""A schedule's timing as the `Nats-Schedule*` headers, and each refusal naming its field."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from services.gateway.triggers.timing import Timing, every_seconds


def test_every_cron_and_at_headers() -> None:
    assert Timing(every="1m30s").headers("t") == {"Nats-Schedule": "@every 1m30s", "Nats-Schedule-Target": "t"}
    assert every_seconds("1h2m3s") == 3723
    cron = Timing(cron="0 30 9 * * mon-fri", timezone="Europe/Paris").headers("t")
    assert cron == {"Nats-Schedule": "0 30 9 * * mon-fri", "Nats-Schedule-Target": "t",
                    "Nats-Schedule-Time-Zone": "Europe/Paris"}
    at = Timing(at=datetime(2027, 3, 28, 2, 30, tzinfo=timezone(timedelta(hours=1))))
    assert at.header() == "@at 2027-03-28T01:30:00Z"
    assert Timing(cron="@hourly").header() == "@hourly"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({}, "exactly one"),
        ({"cron": "* * * * * *", "every": "1s"}, "exactly one"),
        ({"cron": "*/5 * * * *"}, "6 fields"),
        ({"cron": "* * * * * $"}, "not a cron field"),
        ({"every": "1d"}, "`every`"),
        ({"every": "0s"}, "at least 1s"),
        ({"at": "2027-01-01T09:00:00"}, "UTC offset"),
        ({"cron": "* * * * * *", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"every": "5s", "timezone": "Europe/Paris"}, "`cron` only"),
        ({"every": "5s", "jitter": 1}, "jitter"),
    ],
)
def test_refusals_name_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError) as err:
        Timing.model_validate(fields)
    assert named in str(err.value)
