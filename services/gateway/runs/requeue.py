"""Publishes task rows that never reached the stream (NATS down at submit, or a crash between
the row and the publish): a pass at start, every `task_requeue_interval_s`, and right after the
bus reconnects. Every gateway replica runs it; the message id (= task id) makes that safe."""

from __future__ import annotations

import asyncio
import logging

from services.gateway.db import Database
from services.gateway.runs.submit import requeue_unpublished
from shared.aio import cancel_and_wait, wait_set
from shared.bus import Bus

log = logging.getLogger("agentix.gateway.requeue")


class Requeuer:
    def __init__(self, db: Database, bus: Bus, interval_s: float, min_age_s: float) -> None:
        self.db = db
        self.bus = bus
        self.interval_s = max(interval_s, 0.05)
        self.min_age_s = max(min_age_s, 0.0)
        self.published = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.bus.on_reconnect(self._on_reconnect)
        self._task = asyncio.create_task(self._run(), name="task-requeue")

    async def _on_reconnect(self) -> None:
        self._wake.set()

    async def pass_once(self) -> int:
        count = await requeue_unpublished(self.db, self.bus, self.min_age_s)
        self.published += count
        return count

    async def _run(self) -> None:
        while True:
            try:
                await self.pass_once()
            except Exception:  # e.g. the database is briefly unavailable: try again next pass
                log.exception("re-publishing unqueued tasks failed")
            await wait_set(self._wake, self.interval_s)
            self._wake.clear()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
