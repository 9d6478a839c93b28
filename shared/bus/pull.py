"""A durable pull consumer run as a background task: fetch a batch, hand it to the handler, and
ride out disconnects (the client reconnects by itself; fetching resumes when it has)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout

from shared.aio import cancel_and_wait
from shared.bus.client import Bus

log = logging.getLogger("agentix.bus.pull")
BatchHandler = Callable[[list[Msg]], Awaitable[None]]


class PullLoop:
    def __init__(self, bus: Bus, stream: str, durable: str, handle: BatchHandler, batch: int = 100) -> None:
        self.bus = bus
        self.stream = stream
        self.durable = durable
        self.handle = handle
        self.batch = batch
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._sub = await self.bus.js.pull_subscribe_bind(durable=self.durable, stream=self.stream)
        self._task = asyncio.create_task(self._run(), name=f"pull-{self.durable}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _run(self) -> None:
        while True:
            try:
                msgs = await self._sub.fetch(self.batch, timeout=1.0)
            except (NatsTimeout, TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # disconnected: wait for the reconnect
                log.warning("%s: fetch failed (%s); retrying", self.durable, exc)
                await asyncio.sleep(1.0)
                continue
            try:
                await self.handle(msgs)
            except Exception:  # a bug must not stop the consumer; the batch comes back after ack_wait
                log.exception("%s: handling a batch of %d failed", self.durable, len(msgs))
