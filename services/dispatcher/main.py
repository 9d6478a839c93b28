"""The dispatcher process: on the service host (connect, declare, heartbeat, health, drain),
follow the control plane, run tasks from the tasks stream, report breaker states in the
heartbeat, and drain in-flight work on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.worker import Worker
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.contract.heartbeat import Load
from shared.runtime import run_service
from shared.service_host import ServiceHost
from shared.settings import DispatcherSettings

SERVICE = "dispatcher"
DRAIN_GRACE_S = 30.0
# A health answer is gathered within a short window (`gather_health`): the consumer probe must
# not outlast it by much.
CONSUMER_PROBE_S = 1.0


async def consumer_check(bus: Bus) -> dict[str, Any]:
    """Is the durable `dispatcher` consumer of the tasks stream reachable, and how far behind?"""
    names = bus.names
    try:
        info = await asyncio.wait_for(
            bus.js.consumer_info(names.tasks_stream, names.dispatcher_consumer), CONSUMER_PROBE_S
        )
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "pending": info.num_pending, "ack_pending": info.num_ack_pending}


async def run(settings: DispatcherSettings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    async with ServiceHost(settings, SERVICE, stop=stop) as host:
        bus = host.bus
        pool = ModelPool.for_service(settings, bus)
        host.on_release("model pool", pool.aclose)
        await ControlPlane(bus).watch(pool.control.apply)
        await pool.watch_breakers()
        worker = Worker(bus, pool)
        await worker.start()
        host.on_drain("task worker", lambda: worker.drain(DRAIN_GRACE_S))
        detail: dict[str, Any] = {}

        async def refresh_detail() -> None:
            # Heartbeat detail is read synchronously: keep a copy of the breaker states fresh.
            while True:
                with contextlib.suppress(Exception):
                    detail["breakers"] = [b.model_dump(mode="json") for b in await pool.breaker_states()]
                    detail["chain_revision"] = pool.control.chain.revision
                await asyncio.sleep(settings.heartbeat_interval_s)

        refresher = asyncio.create_task(refresh_detail(), name="dispatcher-breaker-detail")
        host.on_release("breaker detail", lambda: cancel_and_wait(refresher))

        async def checks() -> dict[str, Any]:
            worker_state = {
                # While draining the pull loop is stopped on purpose.
                "ok": worker.pulling or host.draining,
                "pulling": worker.pulling,
                "inflight": worker.inflight,
                "concurrency": worker.concurrency,
            }
            return {"worker": worker_state, "consumer": await consumer_check(bus)}

        host.checks("worker", checks)
        host.reports(load=lambda: Load(inflight=worker.inflight, done=worker.done), detail=lambda: dict(detail))
        await host.serve_until(stop)


def main() -> None:
    run_service(SERVICE, run, DispatcherSettings)
