"""How patient the bridge is with an MCP server: apart from the connection, so the service can
configure it without loading the MCP SDK (which only a registered server needs)."""

from __future__ import annotations

from dataclasses import dataclass

from shared.backoff import Backoff


@dataclass(frozen=True)
class Timing:
    """How patient the bridge is with a server (tests shorten these)."""

    connect_s: float = 5.0  # TCP connect, and the whole handshake + tool listing (x3)
    call_s: float = 25.0  # one tool call; below the callers' NATS timeout, so they get our error
    # An idle session re-lists the tools this often (MCP 2026-07-28 has no ping): a dead server
    # shows quickly, and a changed tool list is picked up.
    probe_every_s: float = 3.0
    # A broken session is started again after `retry_min_s`, doubling to `retry_max_s` while it
    # keeps failing (from `retry_min_s` again once it was up).
    retry_min_s: float = 0.2
    retry_max_s: float = 5.0

    @property
    def reconnect(self) -> Backoff:
        return Backoff(self.retry_min_s, self.retry_max_s)
