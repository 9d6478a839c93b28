"""cancel_and_wait stops a task even when it swallows a cancellation (as Python 3.11's
wait_for does when the cancel races with the result it waits for)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys

import pytest

from shared.aio import cancel_and_wait


async def test_a_task_that_swallows_one_cancellation_still_stops() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1  # carry on, as a loop around a racing wait_for would

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled() and swallowed == 1


async def test_a_loop_around_wait_for_outlives_one_racing_cancel_but_not_cancel_and_wait() -> None:
    """The race made deterministic: the item is queued just before the cancel, so the inner
    get completes first. Python 3.11's wait_for then returns the item instead of raising."""
    queue: asyncio.Queue[int] = asyncio.Queue()

    async def poll_forever() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(queue.get(), 0.05)

    task = asyncio.create_task(poll_forever())
    for _ in range(3):
        await asyncio.sleep(0)
    queue.put_nowait(1)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=0.3)
    if sys.version_info < (3, 12):
        assert not done, "the cancellation was expected to be swallowed on 3.11"
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled()


async def test_an_ended_task_and_none_are_fine(caplog: pytest.LogCaptureFixture) -> None:
    """An ended task is left as it ended (not cancelled, its error or result kept), a failure is
    logged once by name instead of raised, and None is a no-op."""
    boom = RuntimeError("boom")

    async def fails() -> None:
        raise boom

    async def succeeds() -> int:
        return 7

    failed = asyncio.create_task(fails(), name="fails")
    finished = asyncio.create_task(succeeds(), name="succeeds")
    await asyncio.wait([failed, finished])
    with caplog.at_level(logging.WARNING, logger="agentix.aio"):
        await cancel_and_wait(failed)
        await cancel_and_wait(finished)
        await cancel_and_wait(None)
    assert not failed.cancelled() and failed.exception() is boom
    assert not finished.cancelled() and finished.result() == 7
    assert [(r.levelno, r.getMessage(), r.exc_info[1] if r.exc_info else None) for r in caplog.records] == [
        (logging.WARNING, "fails ended with an error while stopping", boom)
    ]
