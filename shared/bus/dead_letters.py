"""Dead letters: the MAX_DELIVERIES advisories of a work queue, kept in the dead-letter stream
(`streams._dead_letters`) and handed one at a time to a live worker of that queue. The handler
gets the stream sequence of the exhausted message and how often it was delivered; the advisory
is acked only after the handler returns, so a failure is recorded even if the worker that
should record it crashes on the way."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout

from shared.bus.client import Bus

log = logging.getLogger("agentix.bus.dead_letters")
Handler = Callable[[int, int], Awaitable[None]]  # (stream sequence, deliveries)
RETRY_DELAY_S = 5.0


class DeadLetters:
    def __init__(self, bus: Bus, consumer: str, handle: Handler, retry_delay_s: float = RETRY_DELAY_S) -> None:
        self.bus = bus
        self.retry_delay_s = retry_delay_s
        self.durable = bus.names.dead_consumer(consumer)
        self.handle = handle
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._sub = await self.bus.js.pull_subscribe_bind(durable=self.durable, stream=self.bus.names.dead_stream)
        self._task = asyncio.create_task(self._run(), name=f"dead-letters-{self.durable}")

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
                msgs = await self._sub.fetch(16, timeout=1.0)
            except (NatsTimeout, TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # disconnected: wait for the reconnect
                log.debug("dead-letter fetch failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            for msg in msgs:
                await self._one(msg)

    async def _one(self, msg: Msg) -> None:
        try:
            advisory = json.loads(msg.data)
            seq, deliveries = int(advisory["stream_seq"]), int(advisory.get("deliveries", 0))
        except (KeyError, TypeError, ValueError):
            log.warning("dropping an unreadable dead letter: %r", msg.data[:200])
            with contextlib.suppress(Exception):
                await msg.term()
            return
        try:
            await self.handle(seq, deliveries)
        except Exception:
            log.exception("recording the exhausted message %d failed; trying again in %ss", seq, self.retry_delay_s)
            with contextlib.suppress(Exception):
                await msg.nak(delay=self.retry_delay_s)
            return
        with contextlib.suppress(Exception):
            await msg.ack()
