"""How every NATS-side service process runs: logging and tracing set up, SIGTERM/SIGINT turned
into a stop event the service drains on, and the last spans exported before the process ends."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable

from shared.settings import Settings, get_settings
from shared.telemetry import setup_logging, setup_tracing, shutdown_tracing

ServiceMain = Callable[[Settings, asyncio.Event], Awaitable[None]]


def run_service(service: str, run: ServiceMain) -> None:
    settings = get_settings()
    setup_logging(settings, service)
    setup_tracing(settings, service)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await run(settings, stop)

    try:
        asyncio.run(_main())
    finally:
        shutdown_tracing()
