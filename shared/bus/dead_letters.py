"""Dead letters: the MAX_DELIVERIES advisories of a work queue, kept in the dead-letter stream
(`streams._dead_letters`) and handed one at a time to a live worker of that queue. The handler
gets the stream sequence of the exhausted message and how often it was delivered; the advisory
is acked only after the handler returns, so a failure is recorded even if the worker that
should record it crashes on the way."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg

from shared.bus.client import Bus
from shared.bus.pull import PullLoop

log = logging.getLogger("agentix.bus.dead_letters")
Handler = Callable[[int, int], Awaitable[None]]  # (stream sequence, deliveries)
RETRY_DELAY_S = 5.0


class DeadLetters:
    def __init__(self, bus: Bus, consumer: str, handle: Handler, retry_delay_s: float = RETRY_DELAY_S) -> None:
        self.bus = bus
        self.retry_delay_s = retry_delay_s
        self.handle = handle
        self._loop = PullLoop(bus, bus.names.dead_stream, bus.names.dead_consumer(consumer), self._each, batch=16)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _each(self, msgs: list[Msg]) -> None:
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
