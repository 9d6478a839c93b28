"""A durable pull consumer as the gateway's followers of the bus use it (the task recorder, the
conversation queue, the callback ends on the run events stream; the schedule fires): each batch
is read and handed to `apply`, and acked once `apply` returned — at least once, so `apply` must
be idempotent. A batch whose apply failed comes back (nak, 2 s); a message that cannot be read is
dropped (term), with a warning: redelivering it would not make it readable."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from nats.aio.msg import Msg

from shared.bus import Bus
from shared.bus.pull import PullLoop
from shared.contract.events import AnyEvent, parse_event

log = logging.getLogger("agentix.gateway.runs")
REDELIVER_S = 2.0
T = TypeVar("T")


class BatchConsumer(Generic[T]):
    def __init__(self, bus: Bus, stream: str, durable: str, read: Callable[[Msg], T],
                 apply: Callable[[list[T]], Awaitable[None]], *, name: str, batch: int = 200, linger_s: float = 0.0,
                 grace_s: float = 0.0) -> None:  # fmt: skip
        self.name = name
        self.read = read
        self.apply = apply
        self._grace_s = grace_s
        self._loop = PullLoop(bus, stream, durable, self.handle, batch=batch, linger_s=linger_s)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop(grace_s=self._grace_s)

    async def handle(self, msgs: list[Msg]) -> None:
        items: list[T] = []
        good: list[Msg] = []
        for msg in msgs:
            try:
                items.append(self.read(msg))
                good.append(msg)
            except Exception:
                log.warning("%s: dropping an unreadable message on %s", self.name, msg.subject)
                with contextlib.suppress(Exception):
                    await msg.term()
        if not good:
            return
        try:
            await self.apply(items)
        except Exception:
            log.exception("%s: applying a batch of %d failed; it will be redelivered", self.name, len(items))
            for msg in good:
                with contextlib.suppress(Exception):
                    await msg.nak(delay=REDELIVER_S)
            return
        for msg in good:
            with contextlib.suppress(Exception):
                await msg.ack()


def _read_event(msg: Msg) -> AnyEvent:
    return parse_event(msg.data)


class EventConsumer(BatchConsumer[AnyEvent]):
    """A durable consumer of the run events stream."""

    def __init__(self, bus: Bus, durable: str, apply: Callable[[list[AnyEvent]], Awaitable[None]], *, name: str,
                 batch: int = 200, linger_s: float = 0.0) -> None:  # fmt: skip
        super().__init__(bus, bus.names.events_stream, durable, _read_event, apply, name=name, batch=batch,
                         linger_s=linger_s)
