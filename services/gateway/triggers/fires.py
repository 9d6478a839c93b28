"""A schedule on the bus: its definition written to (or removed from) the schedules stream, and
its fires as the server publishes them. The server's stream leader fires each schedule once,
whichever gateways and dispatchers run; a fire is identified by its stream sequence, so a
redelivered fire is recognised as the same one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from nats.aio.msg import Msg

from services.gateway.triggers.timing import Timing
from shared.bus import Bus

# A fire is kept in the stream this long (its `Nats-TTL`): long enough for any gateway to take it.
FIRE_TTL = "24h"


async def put_schedule(bus: Bus, schedule_id: str, timing: Timing, payload: bytes = b"{}") -> int:
    """Write a schedule's definition (the last message on its subject is the one the server
    follows); returns its stream sequence. A definition the
    server refuses (a cron it cannot parse) raises the server's error."""
    headers = timing.headers(bus.subjects.schedule_fire(schedule_id))
    headers["Nats-Schedule-TTL"] = FIRE_TTL
    ack = await bus.js_publish_raw(bus.subjects.schedule(schedule_id), payload, headers=headers)
    return ack.seq


async def remove_schedule(bus: Bus, schedule_id: str) -> None:
    """Stop a schedule: its definition leaves the stream (fires already published stay)."""
    await bus.js.purge_stream(bus.names.schedules_stream, subject=bus.subjects.schedule(schedule_id))


@dataclass(frozen=True)
class Fire:
    schedule_id: str
    seq: int  # the fire's stream sequence: its identity
    fired_at: datetime
    next_at: str | None  # `Nats-Schedule-Next` (absent or "purge" for a one-shot `at`)
    payload: bytes

    @property
    def fire_id(self) -> str:
        """The fire's own id: the idempotency key of the task it starts."""
        return f"fire:{self.schedule_id}:{self.seq}"


def read_fire(msg: Msg) -> Fire:
    """A fire message (delivered by the `triggers` consumer) as a `Fire`."""
    meta = msg.metadata
    headers = msg.headers or {}
    fired_at = meta.timestamp if meta.timestamp is not None else datetime.now(UTC)
    return Fire(
        schedule_id=msg.subject.rsplit(".", 1)[-1],
        seq=meta.sequence.stream,
        fired_at=fired_at,
        next_at=headers.get("Nats-Schedule-Next"),
        payload=msg.data,
    )
