"""asyncio helpers every service needs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger("agentix.aio")

RECANCEL_S = 0.5


async def wait_set(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `event` is set, at most `timeout_s`; whether it was set (a pause that a stop or
    a wake-up may end early)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()
    return event.is_set()


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` and wait until it has ended, whatever it raised.

    One `cancel()` is not always enough on Python 3.11: `asyncio.wait_for` (used inside nats-py's
    fetch and by our own loops) returns the inner result instead of raising when the cancellation
    lands just as that result arrives, so a loop around it carries on as if nothing happened.
    A shutdown that awaits such a task once would wait forever; this cancels again until it ends.
    """
    if task is None:
        return
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=RECANCEL_S)
    with contextlib.suppress(asyncio.CancelledError):
        if task.exception() is not None:
            log.warning("%s ended with an error while stopping", task.get_name(), exc_info=task.exception())


_spawned: set[asyncio.Future[Any]] = set()


def spawn(work: Awaitable[Any], name: str) -> None:
    """Run `work` on its own, awaited by nobody: kept referenced until it ends (the loop holds
    its tasks weakly, so an unreferenced one may vanish mid-way). `work` reports its own errors."""
    task = asyncio.ensure_future(work)
    if isinstance(task, asyncio.Task):
        task.set_name(name)
    _spawned.add(task)
    task.add_done_callback(_spawned.discard)
