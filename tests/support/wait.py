"""Waiting for a condition that becomes true asynchronously (never a bare sleep)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(check: Callable[[], Awaitable[Any]], attempts: int = 500, every_s: float = 0.02) -> Any:
    """`check()`'s first truthy value, polled every `every_s`; fails after `attempts` tries."""
    for _ in range(attempts):
        value = await check()
        if value:
            return value
        await asyncio.sleep(every_s)
    raise AssertionError("condition never held")
