"""nats-py without aiohttp: nats-py imports aiohttp (for a websocket transport to NATS, which
Agentix never uses) whenever aiohttp is installed, and that is ~11 MB of RSS in every process.
aiohttp is installed for the dispatcher's model client alone, so the gateway and the tool
services load nats-py with aiohttp hidden from it. A process that imports aiohttp itself later
(the dispatcher) gets the real module: only nats-py's one look is refused.

Called from `services/__init__.py`, which every service process imports before any of its
modules imports nats."""

from __future__ import annotations

import sys


def import_nats_without_aiohttp() -> None:
    """Import nats-py's transports with `import aiohttp` failing inside them (idempotent)."""
    if "nats.aio.transport" in sys.modules or "aiohttp" in sys.modules:
        return  # too late, or aiohttp is wanted by this process anyway
    sys.modules["aiohttp"] = None  # type: ignore[assignment]  # makes `import aiohttp` raise ImportError
    try:
        import nats.aio.transport  # noqa: F401
    finally:
        del sys.modules["aiohttp"]
