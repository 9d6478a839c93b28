"""Delivery of stream deltas to the caller's sink, coalesced.

The sink (usually: publish a `token` event, one synced write to the task's log) runs in its own
task. Deltas of the same kind that arrive while it is busy are merged into one, and so are those
that arrive before the next tick of the interval's clock after a delivery: a model streaming
tokens every few ms becomes at most one event per stream per tick (every 50 ms by default,
`AGENTIX_TOKEN_EVENT_INTERVAL_MS`; the ticks are the same for every stream of the process),
while a model slower than that still gets one event per delta, sent as it comes. The first delta
of a quiet stream goes out at once (time to first token is not delayed), and `flush()` sends
what is held without waiting for the interval (the end of a call is not delayed either). Order
is kept; nothing is dropped; `flush()` waits until everything was delivered and re-raises a
sink failure.

A producer that reads its input in rounds asks `read_wait()` how long what it pushes next would
be held anyway, and need not read before then (the model's stream, `endpoint.py`: one read per
interval instead of one wake-up per chunk).
"""

from __future__ import annotations

import asyncio
import contextlib

from services.dispatcher.llm.api import Delta, DeltaSink


class DeltaStream:
    def __init__(self, sink: DeltaSink, coalesce: bool = True, interval_s: float = 0.0) -> None:
        self.sink = sink
        self.coalesce = coalesce
        self.interval_s = interval_s
        self._pending: list[Delta] = []
        self._task: asyncio.Task[None] | None = None
        self._hurried = False  # set by `flush`: deliver what is held now, wait no more
        self._waiter: asyncio.Future[None] | None = None  # the drain's wait for the interval's end
        self._held_until = 0.0  # loop time before which a pushed delta waits for the next delivery

    async def push(self, delta: Delta) -> None:
        if not self.coalesce:
            await self.sink(delta)
            return
        self._raise_failure()
        last = self._pending[-1] if self._pending else None
        if last is not None and (last.kind, last.model, last.call_id) == (delta.kind, delta.model, delta.call_id):
            self._pending[-1] = Delta(last.kind, last.text + delta.text, last.model, last.call_id, last.tool)
        else:
            self._pending.append(delta)
        if self._task is None or self._task.done():
            # Delivered at once: what comes next waits for the tick `_next_slot` gives.
            self._held_until = self._next_slot(asyncio.get_running_loop().time())
            self._task = asyncio.create_task(self._drain(), name="llm-deltas")

    def _next_slot(self, now: float) -> float:
        """When a delivery that is held goes out: at a tick of the interval's clock (the loop's
        time in whole intervals), the same ticks for every stream of the process, so the pieces
        of the streams that are due go out together — published in one write to NATS, stored
        and handed on as a batch — instead of each on its own time. The first tick at least half
        an interval away: after a piece sent off the clock (the first of a quiet stream), the
        next still comes an interval later on average, not at the next tick however near."""
        if self.interval_s <= 0:
            return now
        return ((now + self.interval_s / 2) // self.interval_s + 1) * self.interval_s

    def read_wait(self) -> float:
        """Seconds for which a delta pushed now would be held before it goes out (0: at once, or
        as soon as the sink is free)."""
        if self._task is None or self._task.done() or self._hurried:
            return 0.0
        return max(0.0, self._held_until - asyncio.get_running_loop().time())

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending, []
            for delta in batch:
                await self.sink(delta)
            if self.interval_s > 0 and not self._hurried:
                # What arrives meanwhile is merged and goes out with the next pass (or ends the
                # pass early: `flush`); with nothing new, the drain ends and the next delta is
                # sent as soon as it comes. A timer and a future, not a timeout: this wait
                # ends every interval of every stream, and a timeout ends by cancelling.
                self._held_until = self._next_slot(loop.time())
                waiter = self._waiter = loop.create_future()
                timer = loop.call_at(self._held_until, _wake, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    self._waiter = None

    def _raise_failure(self) -> None:
        task = self._task
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            self._task = None
            raise task.exception()  # type: ignore[misc]

    async def flush(self) -> None:
        self._hurried = True
        if self._waiter is not None:
            _wake(self._waiter)
        while self._task is not None:
            if not self._task.done():
                await self._task  # a sink failure is raised here
            self._raise_failure()
            if self._pending:  # only if the producer pushed while the drain was ending
                self._task = asyncio.create_task(self._drain(), name="llm-deltas")
            else:
                self._task = None

    async def settle(self) -> None:
        """Deliver what is pending when the call fails anyway; a sink error here is dropped
        (the call's own error is the one to report)."""
        with contextlib.suppress(Exception):
            await self.flush()

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._pending.clear()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
