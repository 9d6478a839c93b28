"""Sliding-window rate limits: Redis (shared by every gateway replica) when configured, an
in-process window otherwise (or while Redis is unreachable)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("agentix.gateway.ratelimit")

WINDOW_S = 60.0

# Atomic check-and-add over a sorted set of request timestamps (ms).
_LUA = """
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0


class LocalWindow:
    def __init__(self) -> None:
        self._hits: dict[str, deque[float]] = {}
        self._lock = asyncio.Lock()

    async def hit(self, key: str, limit: int, window_s: float = WINDOW_S) -> Decision:
        now = time.monotonic()
        async with self._lock:
            hits = self._hits.setdefault(key, deque())
            while hits and hits[0] <= now - window_s:
                hits.popleft()
            if len(hits) < limit:
                hits.append(now)
                return Decision(True)
            return Decision(False, max(1, math.ceil(hits[0] + window_s - now)))


class RateLimiter:
    def __init__(self, limit_per_min: int, redis: Any | None = None, key_prefix: str = "agentix:") -> None:
        self.limit = limit_per_min
        self.redis = redis
        self.key_prefix = key_prefix
        self.local = LocalWindow()
        self._script: Any = redis.register_script(_LUA) if redis is not None else None

    async def hit(self, key: str) -> Decision:
        if self.limit <= 0:
            return Decision(True)
        if self._script is not None:
            try:
                now_ms = int(time.time() * 1000)
                allowed, wait_ms = await self._script(
                    keys=[f"{self.key_prefix}ratelimit:{key}"],
                    args=[now_ms, int(WINDOW_S * 1000), self.limit, f"{now_ms}-{uuid.uuid4().hex[:8]}"],
                )
                if int(allowed):
                    return Decision(True)
                return Decision(False, max(1, math.ceil(float(wait_ms) / 1000)))
            except Exception as exc:  # Redis down: keep limiting locally rather than failing open
                log.warning("redis rate limit unavailable, using the in-process window: %s", exc)
        return await self.local.hit(key, self.limit)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
