"""How often one model is tried before the chain moves on, and how long to wait in between."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # per model, the first included
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 30.0  # a longer Retry-After: fail over now rather than wait

    def backoff(self, attempt: int) -> float:
        delay = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return delay / 2 + random.uniform(0, delay / 2)  # jitter spreads replicas apart
