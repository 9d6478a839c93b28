"""How every service process runs: logging and tracing set up, SIGTERM/SIGINT turned into a
stop event the service drains on (on its `shared.service_host.ServiceHost`), and the last spans
exported before the process ends; and, once the service is set up, its heap settled for the
cyclic garbage collector (`settle_heap`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from shared.errors import AgentixError
from shared.settings import CommonSettings
from shared.startup import StoppedWhileStarting
from shared.telemetry import setup_logging, setup_tracing, shutdown_tracing

S = TypeVar("S", bound=CommonSettings)
ServiceMain = Callable[[S, asyncio.Event], Awaitable[None]]

# Allocations (net of deallocations) between two collections of the youngest generation.
# CPython's 700 suits short scripts; a service under load reaches it several times per request,
# and each collection traverses whatever the requests in flight hold at that moment.
YOUNG_GENERATION_THRESHOLD = 10_000
_service_process = False  # this process is a service's own (`service_process`), not a test's
log = logging.getLogger("agentix.runtime")


def run_service(service: str, run: ServiceMain[S], settings_type: type[S]) -> None:
    """The whole process of a NATS-side service: `run(settings, stop)` until SIGTERM/SIGINT. A
    described failure (`AgentixError`: say, a stream the server refuses) ends it with that one
    line and exit code 1, not a traceback."""
    settings = settings_type()
    with service_process(settings, service):

        async def _main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(sig, stop.set)
            await run(settings, stop)

        try:
            asyncio.run(_main())
        except StoppedWhileStarting as stopped:
            log.info("%s", stopped)
        except AgentixError as exc:
            log.error("%s stopped: %s", service, exc)
            sys.exit(1)


@contextlib.contextmanager
def service_process(settings: CommonSettings, service: str) -> Iterator[None]:
    """Logs in the one format, traces exported when configured, and flushed when the process
    ends. The gateway uses this around uvicorn, which handles its own signals."""
    global _service_process
    setup_logging(settings, service)
    setup_tracing(settings, service)
    _service_process = True
    try:
        yield
    finally:
        _service_process = False
        shutdown_tracing()


def settle_heap() -> None:
    """Once a service process is set up (its `ServiceHost` serves): what it built at start (the
    modules, classes, app and connections) moves to the collector's permanent generation, so
    no full collection traverses it again, and the youngest generation is collected less often.
    Under the e2e load the gateway spent 13 % of its CPU in the collector, mostly in full
    collections of the ~190,000 objects it holds from start.

    Only in a service's own process: frozen objects are never collected, so a process that
    starts services again and again (a test run) would keep each start's cyclic garbage."""
    if not _service_process:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
