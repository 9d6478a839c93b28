"""One work-queue message as its handler sees it (`workqueue.py`): the payload, which delivery
this is, and one answer to give — ack, nak or term — as a `Verdict`.

The handler never holds the NATS message: what it may do with it is here, so the worker can
count what is still in flight, renew the leases of what is unanswered, and hand back what is
unanswered when it stops."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from nats.aio.msg import Msg

from shared.bus.retry import with_retries


@dataclass(frozen=True)
class Ack:
    """Done: the message leaves the queue. `sync` waits for the server's confirmation (up to
    `timeout`), for when what follows must not happen unless the ack is stored."""

    sync: bool = False
    timeout: float = 1.0


@dataclass(frozen=True)
class Nak:
    """Not now: deliver it again, after `delay` seconds if given (this counts as a delivery)."""

    delay: float | None = None


@dataclass(frozen=True)
class Term:
    """Never again: the message is dropped without a MAX_DELIVERIES advisory."""


Verdict = Ack | Nak | Term


class Delivery:
    """A message of a work queue, answered at most once. An answer that fails to reach the
    server leaves it unanswered (the worker then treats it like one its handler never answered)."""

    def __init__(self, msg: Msg, max_deliver: int, on_settled: Callable[[Delivery], None]) -> None:
        self._msg = msg
        self._max_deliver = max_deliver
        self._on_settled = on_settled
        self.settled = False

    @property
    def subject(self) -> str:
        return self._msg.subject

    @property
    def data(self) -> bytes:
        return self._msg.data

    @property
    def headers(self) -> dict[str, str] | None:
        return self._msg.headers

    @property
    def attempt(self) -> int:
        """Which delivery this is, from 1."""
        return self._msg.metadata.num_delivered or 1

    @property
    def seq(self) -> int:
        """The message's sequence in its stream (what a dead letter names)."""
        return self._msg.metadata.sequence.stream

    @property
    def last(self) -> bool:
        """No delivery follows this one if it goes unanswered or is nak'ed."""
        return self._max_deliver > 0 and self.attempt >= self._max_deliver

    async def settle(self, verdict: Verdict) -> None:
        """Answer the message; a second answer is ignored."""
        if self.settled:
            return
        if isinstance(verdict, Ack):
            if verdict.sync:
                # Through a leader election of the consumer: acking twice is harmless.
                await with_retries(lambda: self._msg.ack_sync(timeout=verdict.timeout),
                                   what=f"ack of message {self.seq}")
            else:
                await self._msg.ack()
        elif isinstance(verdict, Nak):
            await self._msg.nak(delay=verdict.delay)
        else:
            await self._msg.term()
        self.settled = True
        self._on_settled(self)

    async def renew(self) -> None:
        """Ask for another ack wait (`in_progress`): the handler is still at work. Best effort:
        a lost renewal at worst lets the message be delivered again."""
        if not self.settled:
            with contextlib.suppress(Exception):
                await self._msg.in_progress()
