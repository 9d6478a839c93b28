"""The recorder: a durable pull consumer on the task status and exec channels that keeps the
task records in step with the events. Acks only after the database commit (at least once;
`records.apply_events` makes repeats harmless)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import nats.errors
from nats.aio.msg import Msg

from services.gateway.db import Database
from services.gateway.metrics import GatewayMetrics
from services.gateway.records import apply_events
from shared.bus import Bus
from shared.contract.events import AnyEvent, parse_event

log = logging.getLogger("agentix.gateway.recorder")


class Recorder:
    def __init__(self, bus: Bus, db: Database, metrics: GatewayMetrics | None = None, batch: int = 200) -> None:
        self.bus = bus
        self.db = db
        self.metrics = metrics
        self.batch = batch
        self._task: asyncio.Task[None] | None = None
        self._sub: Any = None
        self.applied = 0

    async def start(self) -> None:
        self._sub = await self.bus.js.pull_subscribe_bind(
            durable=self.bus.names.recorder_consumer, stream=self.bus.names.events_stream
        )
        self._task = asyncio.create_task(self._run(), name="recorder")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _run(self) -> None:
        while True:
            try:
                msgs = await self._sub.fetch(self.batch, timeout=1.0)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # disconnected: wait for the reconnect
                log.warning("recorder fetch failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            await self.handle(msgs)

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
            await self.db.run(apply_events, events)
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
