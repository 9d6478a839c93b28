"""The recorder: a durable pull consumer on the task status and exec channels that keeps the
task records in step with the events. Acks only after the database commit (at least once;
`records.apply_events` makes repeats harmless). It records tasks and nothing else: the chat runs
follow their tasks on the conversation queue's own consumer (`chat.queue`)."""

from __future__ import annotations

import contextlib
import logging

from nats.aio.msg import Msg

from services.gateway.db import Database
from services.gateway.fleet.metrics import GatewayMetrics
from services.gateway.runs.recorded import announce
from services.gateway.runs.records import apply_events
from shared.bus import Bus
from shared.bus.pull import PullLoop
from shared.contract.events import AnyEvent, parse_event

log = logging.getLogger("agentix.gateway.recorder")


class Recorder:
    def __init__(self, bus: Bus, db: Database, metrics: GatewayMetrics | None = None, batch: int = 200,
                 linger_s: float = 0.0) -> None:
        self.bus = bus
        self.db = db
        self.metrics = metrics
        self.applied = 0
        self._loop = PullLoop(bus, bus.names.events_stream, bus.names.recorder_consumer, self.handle, batch=batch,
                              linger_s=linger_s)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def handle(self, msgs: list[Msg]) -> None:
        events: list[AnyEvent] = []
        good: list[Msg] = []
        for msg in msgs:
            try:
                events.append(parse_event(msg.data))
                good.append(msg)
            except ValueError:
                log.warning("recorder: dropping an unreadable event on %s", msg.subject)
                with contextlib.suppress(Exception):
                    await msg.term()
        if not good:
            return
        try:
            changed = await self.db.run(apply_events, events)
            await announce(self.bus, changed)
        except Exception:
            log.exception("recorder: database write failed; events will be redelivered")
            for msg in good:
                with contextlib.suppress(Exception):
                    await msg.nak(delay=2.0)
            return
        self.applied += len(events)
        if self.metrics is not None:
            for event in events:
                self.metrics.recorded_events.labels(type=event.type).inc()
        for msg in good:
            with contextlib.suppress(Exception):
                await msg.ack()
