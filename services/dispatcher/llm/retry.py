"""How often one model is tried before the chain moves on, and how long to wait in between."""

from __future__ import annotations

from dataclasses import dataclass

from shared.backoff import Backoff


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # per model, the first included
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 30.0  # a longer Retry-After: fail over now rather than wait

    @property
    def backoff(self) -> Backoff:
        """Half of each wait is drawn at random: replicas rate-limited together spread apart."""
        return Backoff(self.base_delay_s, self.max_delay_s, jitter=0.5, attempts=self.attempts)
