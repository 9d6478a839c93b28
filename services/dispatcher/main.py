"""The dispatcher process: connect, declare, follow the control plane, run tasks from the tasks
stream, heartbeat (with breaker states), answer health, and drain in-flight work on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.worker import Worker
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.heartbeat import Heartbeater, new_instance_id, serve_health
from shared.contract.heartbeat import Load
from shared.runtime import run_service
from shared.settings import Settings

SERVICE = "dispatcher"
DRAIN_GRACE_S = 30.0
log = logging.getLogger("agentix.dispatcher")


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    bus = await Bus.connect(settings, name=SERVICE)
    await bus.declare()
    pool = ModelPool.for_service(settings, bus)
    control = ControlPlane(bus)
    await control.watch(pool.control.apply)
    worker = Worker(bus, pool)
    await worker.start()
    instance = new_instance_id(SERVICE)
    detail: dict[str, Any] = {}

    async def refresh_detail() -> None:
        # Heartbeat detail is read synchronously: keep a copy of the breaker states fresh.
        while True:
            with contextlib.suppress(Exception):
                detail["breakers"] = [b.model_dump(mode="json") for b in await pool.breaker_states()]
                detail["chain_revision"] = pool.control.chain.revision
            await asyncio.sleep(settings.heartbeat_interval_s)

    async def checks() -> dict[str, Any]:
        return {"nats": {"ok": bus.connected}, "worker": {"ok": True, "inflight": worker.inflight}}

    refresher = asyncio.create_task(refresh_detail())
    beats = Heartbeater(bus, SERVICE, instance, load=lambda: Load(inflight=worker.inflight, done=worker.done),
                        detail=lambda: dict(detail))
    beats.start()
    health = await serve_health(bus, SERVICE, instance, checks)
    log.info("%s %s running (concurrency %d)", SERVICE, instance, worker.concurrency)
    await stop.wait()
    log.info("%s draining %d task(s)", SERVICE, worker.inflight)
    await worker.drain(DRAIN_GRACE_S)
    refresher.cancel()
    with contextlib.suppress(Exception):
        await health.unsubscribe()
    await beats.stop()
    await pool.aclose()
    await bus.close()


def main() -> None:
    run_service(SERVICE, run)
