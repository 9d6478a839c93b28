"""Where a service instance is in its start, and what it is waiting for: the one record of it.

A service starts in phases: `connecting` (waiting for NATS to answer), `declaring` (its streams,
consumers and buckets, on a cluster that may still be forming), `wiring` (what it runs on the
bus), then `serving`; or it ends `failed` (a config the server refuses, a wait past its budget).
The waits report here what they wait for (`waiting`, the `on_wait` of the bus's retry loop), so
the gateway's `/ready` answers "starting" and why while it lasts, and the logs say the same."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

Phase = Literal["connecting", "declaring", "wiring", "serving", "failed"]
_DOING: dict[str, str] = {
    "connecting": "connecting to NATS",
    "declaring": "declaring streams",
    "wiring": "starting its bus side",
}


class StoppedWhileStarting(Exception):
    """The service was asked to stop before it had started: it ends with nothing to drain."""


class Startup:
    def __init__(self) -> None:
        self.phase: Phase = "connecting"
        self.waiting_for: str | None = None
        self.error: str | None = None
        self._since = time.monotonic()
        self._settled = asyncio.Event()  # serving or failed

    @property
    def serving(self) -> bool:
        return self.phase == "serving"

    @property
    def failed(self) -> bool:
        return self.phase == "failed"

    def enter(self, phase: Phase) -> None:
        self.phase, self.waiting_for = phase, None

    def waiting(self, reason: str) -> None:
        """What the current phase waits for (told by the retry loop at each attempt)."""
        self.waiting_for = reason

    def served(self) -> None:
        self.enter("serving")
        self._settled.set()

    def fail(self, exc: BaseException) -> None:
        self.enter("failed")
        self.error = str(exc) or type(exc).__name__
        self._settled.set()

    def describe(self) -> str:
        """One sentence for an operator: what the instance is doing or waiting for."""
        if self.phase == "failed":
            return self.error or "failed"
        if self.phase == "serving":
            return "serving"
        return self.waiting_for or _DOING[self.phase]

    def check(self) -> dict[str, Any]:
        """As a readiness check: ok once serving; else the phase, why, and for how long."""
        state = self.phase if self.phase in ("serving", "failed") else "starting"
        out: dict[str, Any] = {"ok": self.serving, "state": state}
        if not self.serving:
            out |= {"phase": self.phase, "detail": self.describe(), "for_s": round(time.monotonic() - self._since, 1)}
        return out

    async def settled(self) -> None:
        """Until the instance serves or its start failed."""
        await self._settled.wait()
