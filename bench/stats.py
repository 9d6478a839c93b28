"""The one percentile the latency benchmarks report (nearest rank, no interpolation: every figure
printed is a latency that was measured)."""

from __future__ import annotations


def pct(samples: list[float], q: float) -> float:
    """The `q` quantile (0–1) of `samples`, by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
