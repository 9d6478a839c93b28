"""A dispatcher run in the test's own event loop, stopped (drained) when the block ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from services.dispatcher.main import run as run_dispatcher
from shared.settings import Settings


@contextlib.asynccontextmanager
async def dispatcher(settings: Settings, stop_timeout_s: float = 60.0) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(run_dispatcher(settings, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, stop_timeout_s)
