"""The recorder: a durable pull consumer on the task status and exec channels that keeps the
task records in step with the events. Acks only after the database commit (at least once;
`records.apply_events` makes repeats harmless). It records tasks and nothing else: the chat runs
follow their tasks on the conversation queue's own consumer (`chat.queue`)."""

from __future__ import annotations

from services.gateway.db import Database
from services.gateway.fleet.metrics import GatewayMetrics
from services.gateway.runs.consumer import EventConsumer
from services.gateway.runs.recorded import announce
from services.gateway.runs.records import apply_events
from shared.bus import Bus
from shared.contract.events import AnyEvent


class Recorder:
    def __init__(self, bus: Bus, db: Database, metrics: GatewayMetrics | None = None, batch: int = 200,
                 linger_s: float = 0.0) -> None:
        self.bus = bus
        self.db = db
        self.metrics = metrics
        self.applied = 0
        self._consumer = EventConsumer(bus, bus.names.recorder_consumer, self.record, name="recorder", batch=batch,
                                       linger_s=linger_s)

    async def start(self) -> None:
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()

    async def record(self, events: list[AnyEvent]) -> None:
        """One batch, committed and then announced (`recorded`); acked by the consumer after."""
        changed = await self.db.run(apply_events, events)
        await announce(self.bus, changed)
        self.applied += len(events)
        if self.metrics is not None:
            for event in events:
                self.metrics.recorded_events.labels(type=event.type).inc()
