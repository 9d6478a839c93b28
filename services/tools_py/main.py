"""tools_py: connect, declare, serve the tools, heartbeat, answer health, drain on SIGTERM."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from services.tools_py import tools
from services.tools_py.registry import registry
from shared.bus import Bus
from shared.bus.heartbeat import Heartbeater, new_instance_id, serve_health
from shared.bus.tools import serve_tools
from shared.contract.heartbeat import Load
from shared.runtime import run_service
from shared.settings import Settings

SERVICE = "tools-py"
log = logging.getLogger("agentix.tools_py")


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    bus = await Bus.connect(settings, name=SERVICE)
    await bus.declare()
    server = await serve_tools(bus, registry)
    sandbox_reason = await tools.sandbox.sandbox.available()
    if sandbox_reason:
        log.warning("code_exec unavailable here: %s", sandbox_reason)
    instance = new_instance_id(SERVICE)

    def load() -> Load:
        return Load(inflight=server.inflight, done=sum(m.calls for m in server.metrics.values()))

    def detail() -> dict[str, Any]:
        return {"sandbox": "ok" if sandbox_reason is None else sandbox_reason, "tools": sorted(registry.specs)}

    async def checks() -> dict[str, Any]:
        return {
            "nats": {"ok": bus.connected},
            # code_exec refusing to run is a degraded tool, not a dead service.
            "sandbox": {"ok": True, "available": sandbox_reason is None, "reason": sandbox_reason},
        }

    beats = Heartbeater(bus, SERVICE, instance, load=load, detail=detail)
    beats.start()
    health = await serve_health(bus, SERVICE, instance, checks)
    log.info("%s %s serving %d tools", SERVICE, instance, len(registry.specs))
    await stop.wait()
    log.info("%s draining", SERVICE)
    await server.drain()
    await health.unsubscribe()
    await beats.stop()
    await bus.close()


def main() -> None:
    run_service(SERVICE, run)
