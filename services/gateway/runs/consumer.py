"""A durable pull consumer of the run events stream, as the gateway's followers of runs use it
(the task recorder, the conversation queue): each batch is parsed and handed to `apply`, and
acked once `apply` returned — at least once, so `apply` must be idempotent. A batch whose apply
failed comes back (nak, 2 s); an event that cannot be read is dropped (term), with a warning."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg

from shared.bus import Bus
from shared.bus.pull import PullLoop
from shared.contract.events import AnyEvent, parse_event

log = logging.getLogger("agentix.gateway.runs")
Apply = Callable[[list[AnyEvent]], Awaitable[None]]
REDELIVER_S = 2.0


class EventConsumer:
    def __init__(self, bus: Bus, durable: str, apply: Apply, *, name: str, batch: int = 200,
                 linger_s: float = 0.0) -> None:
        self.name = name
        self.apply = apply
        self._loop = PullLoop(bus, bus.names.events_stream, durable, self.handle, batch=batch, linger_s=linger_s)

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
                log.warning("%s: dropping an unreadable event on %s", self.name, msg.subject)
                with contextlib.suppress(Exception):
                    await msg.term()
        if not good:
            return
        try:
            await self.apply(events)
        except Exception:
            log.exception("%s: applying a batch failed; its events will be redelivered", self.name)
            for msg in good:
                with contextlib.suppress(Exception):
                    await msg.nak(delay=REDELIVER_S)
            return
        for msg in good:
            with contextlib.suppress(Exception):
                await msg.ack()
