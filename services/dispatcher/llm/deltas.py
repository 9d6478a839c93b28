"""Delivery of stream deltas to the caller's sink, coalesced.

The sink (usually: publish a `token` event, one synced write to the task's log) runs in its own
task. Deltas of the same kind that arrive while it is busy are merged into one, and so are those
that arrive within `interval_s` after a delivery: a model streaming tokens every few ms becomes
at most one event per stream per interval (50 ms by default, `AGENTIX_TOKEN_EVENT_INTERVAL_MS`),
while a model slower than that still gets one event per delta, sent as it comes. The first delta
of a quiet stream goes out at once (time to first token is not delayed), and `flush()` sends
what is held without waiting for the interval (the end of a call is not delayed either). Order
is kept; nothing is dropped; `flush()` waits until everything was delivered and re-raises a
sink failure.
"""

from __future__ import annotations

import asyncio
import contextlib

from services.dispatcher.llm.api import Delta, DeltaSink
from shared.aio import wait_set


class DeltaStream:
    def __init__(self, sink: DeltaSink, coalesce: bool = True, interval_s: float = 0.0) -> None:
        self.sink = sink
        self.coalesce = coalesce
        self.interval_s = interval_s
        self._pending: list[Delta] = []
        self._task: asyncio.Task[None] | None = None
        self._hurry = asyncio.Event()  # set by `flush`: deliver what is held now, wait no more

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
            self._task = asyncio.create_task(self._drain(), name="llm-deltas")

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            for delta in batch:
                await self.sink(delta)
            if self.interval_s > 0 and not self._hurry.is_set():
                # What arrives meanwhile is merged and goes out with the next pass (or ends the
                # pass early: `flush`); with nothing new, the drain ends and the next delta is
                # sent as soon as it comes.
                await wait_set(self._hurry, self.interval_s)

    def _raise_failure(self) -> None:
        task = self._task
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            self._task = None
            raise task.exception()  # type: ignore[misc]

    async def flush(self) -> None:
        self._hurry.set()
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
