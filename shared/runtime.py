"""How every service process runs: logging and tracing set up, SIGTERM/SIGINT turned into a
stop event the service drains on (on its `shared.service_host.ServiceHost`), and the last spans
exported before the process ends."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from shared.settings import CommonSettings
from shared.telemetry import setup_logging, setup_tracing, shutdown_tracing

S = TypeVar("S", bound=CommonSettings)
ServiceMain = Callable[[S, asyncio.Event], Awaitable[None]]


def run_service(service: str, run: ServiceMain[S], settings_type: type[S]) -> None:
    """The whole process of a NATS-side service: `run(settings, stop)` until SIGTERM/SIGINT."""
    settings = settings_type()
    with service_process(settings, service):

        async def _main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, stop.set)
            await run(settings, stop)

        asyncio.run(_main())


@contextlib.contextmanager
def service_process(settings: CommonSettings, service: str) -> Iterator[None]:
    """Logs in the one format, traces exported when configured, and flushed when the process
    ends. The gateway uses this around uvicorn, which handles its own signals."""
    setup_logging(settings, service)
    setup_tracing(settings, service)
    try:
        yield
    finally:
        shutdown_tracing()
