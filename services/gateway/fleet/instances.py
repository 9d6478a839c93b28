"""Every service instance seen on `P.heartbeat.>`, with the latest beat of each. An instance
missing three beats in a row is dropped from the live list (kept a while under `lost`)."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg

from shared.bus import Bus
from shared.contract.heartbeat import Heartbeat

log = logging.getLogger("agentix.gateway.instances")
MISSED_BEATS = 3
FORGET_AFTER_S = 600.0


@dataclass
class Seen:
    beat: Heartbeat
    received: float  # monotonic: immune to clock skew between hosts


class InstanceRegistry:
    def __init__(self, bus: Bus, clock: Any = time.monotonic) -> None:
        self.bus = bus
        self.clock = clock
        self._seen: dict[tuple[str, str], Seen] = {}
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.bus.subjects.heartbeat_all, cb=self._on_beat)

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _on_beat(self, msg: Msg) -> None:
        try:
            beat = Heartbeat.model_validate_json(msg.data)
        except ValueError:
            log.debug("ignoring a malformed heartbeat on %s", msg.subject)
            return
        self.observe(beat)

    def observe(self, beat: Heartbeat) -> None:
        self._seen[(beat.service, beat.instance)] = Seen(beat, self.clock())

    def _age(self, seen: Seen) -> float:
        return self.clock() - seen.received

    def _stale(self, seen: Seen) -> bool:
        return self._age(seen) > MISSED_BEATS * max(seen.beat.interval_s, 0.1)

    def live(self, service: str | None = None) -> list[Seen]:
        self._forget_old()
        return [s for s in self._seen.values() if not self._stale(s) and (service is None or s.beat.service == service)]

    def lost(self) -> list[Seen]:
        self._forget_old()
        return [s for s in self._seen.values() if self._stale(s)]

    def _forget_old(self) -> None:
        for key, seen in list(self._seen.items()):
            if self._age(seen) > FORGET_AFTER_S:
                del self._seen[key]

    def fresh(self, service: str) -> bool:
        return bool(self.live(service))

    def describe(self, seen: Seen) -> dict[str, Any]:
        beat = seen.beat
        age = self._age(seen)
        return {
            "service": beat.service,
            "instance": beat.instance,
            "version": beat.version,
            "started_at": beat.started_at,
            "last_seen": beat.ts,
            "interval_s": beat.interval_s,
            "age_s": round(age, 2),  # seconds since the last beat arrived (this gateway's clock)
            # One late beat is tolerated; three missed drop the instance from the live list.
            "healthy": age <= 2 * max(beat.interval_s, 0.1),
            "load": beat.load.model_dump(),
            "detail": beat.detail,
        }
