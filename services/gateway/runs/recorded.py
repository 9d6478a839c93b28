"""Readers wait for the records, they never write them.

A run's log runs ahead of its records: the recorder (task rows) and the conversation queue (chat
runs, their answers) follow the events asynchronously. A reader that must not answer ahead of a
record — a LangGraph stream's `end` before the thread holds the answer, a thread's state read
just after — waits here until the record agrees. Whoever commits a change to a run's records
announces it on `P.recorded.<run>` (core NATS: every gateway replica hears it, whichever applied
the change); a waiter checks its condition, and again at each announcement for its run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.bus import Bus

log = logging.getLogger("agentix.gateway.recorded")
# How long a reader waits for a record before it answers anyway (the recorder is down, or far
# behind): a bound, not a pace — an announcement ends the wait as soon as it comes.
WAIT_S = 10.0
# A waiter looks again this often even without an announcement (one lost to a reconnect).
RECHECK_S = 1.0


async def announce(bus: Bus | None, run_ids: Iterable[str]) -> None:
    """Tell every gateway that the records of `run_ids` changed (after the commit)."""
    if bus is None or not bus.connected:
        return
    for run_id in run_ids:
        with contextlib.suppress(Exception):  # a waiter looks again by itself
            await bus.nc.publish(bus.subjects.recorded(run_id), b"")


class RecordWatch:
    """This gateway's waiters for records, woken by the announcements of any replica. It listens
    only for the runs someone waits on (a subscription per such run, while they wait): most
    announcements have no reader waiting, and then no gateway receives them."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._subs: dict[str, Subscription] = {}

    async def start(self) -> None:
        """Nothing to do until a reader waits (kept for the lifespan's symmetry)."""

    async def stop(self) -> None:
        subs, self._subs = list(self._subs.values()), {}
        for sub in subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    def _announced(self, run_id: str) -> Callable[[Msg], Awaitable[None]]:
        async def wake(_: Msg) -> None:
            for woken in self._waiters.get(run_id, ()):
                woken.set()

        return wake

    async def until(self, run_id: str, agrees: Callable[[], Awaitable[bool]], timeout_s: float = WAIT_S) -> bool:
        """Wait until `agrees()` (a read of the record); False when it still does not after
        `timeout_s` (the caller answers with what the log says)."""
        woken = asyncio.Event()
        if run_id not in self._waiters:
            self._waiters[run_id] = set()
            self._subs[run_id] = await self.bus.nc.subscribe(self.bus.subjects.recorded(run_id),
                                                             cb=self._announced(run_id))
        self._waiters[run_id].add(woken)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while True:
                woken.clear()
                if await agrees():
                    return True
                left = deadline - loop.time()
                if left <= 0:
                    log.warning("the record of %s did not follow its log within %.0f s", run_id, timeout_s)
                    return False
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, RECHECK_S)):
                        await woken.wait()
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    del self._waiters[run_id]
                    sub = self._subs.pop(run_id, None)
                    if sub is not None:
                        with contextlib.suppress(Exception):
                            await sub.unsubscribe()
