"""Concurrency helper of node bodies (map items, coordinator experts, dual models)."""

from __future__ import annotations

import asyncio
from typing import Any


async def gather_all(coros: list[Any]) -> list[Any]:
    """Run coroutines concurrently; the first exception cancels the others and is re-raised as
    itself (not wrapped in an ExceptionGroup), so BudgetExceeded/cancellation propagate plainly."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
