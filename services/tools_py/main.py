"""tools_py: on the service host (connect, declare, heartbeat, health, drain), serve the
algorithm tools; on SIGTERM stop taking calls and finish the ones in flight."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from services.tools_py import runtime, tools
from services.tools_py.registry import registry
from shared.bus.tools import serve_tools
from shared.contract.heartbeat import Load
from shared.runtime import run_service
from shared.service_host import ServiceHost
from shared.settings import ToolsPySettings

SERVICE = "tools-py"
log = logging.getLogger("agentix.tools_py")
assert tools  # importing the package declared the tools


async def run(settings: ToolsPySettings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    async with ServiceHost(settings, SERVICE, stop=stop) as host:
        rt = runtime.Runtime.from_settings(settings)
        runtime.install(rt)
        host.on_release("runtime", lambda: runtime.install(None))
        server = await serve_tools(host.bus, registry)
        host.on_drain("tool calls", server.drain)
        sandbox_reason = await rt.sandbox.available()
        if sandbox_reason:
            log.warning("code_exec unavailable here: %s", sandbox_reason)

        def load() -> Load:
            return Load(inflight=server.inflight, done=sum(m.calls for m in server.metrics.values()))

        def detail() -> dict[str, Any]:
            return {"sandbox": "ok" if sandbox_reason is None else sandbox_reason, "tools": sorted(registry.specs)}

        async def checks() -> dict[str, Any]:
            # code_exec refusing to run is a degraded tool, not a dead service.
            return {"sandbox": {"ok": True, "available": sandbox_reason is None, "reason": sandbox_reason}}

        host.checks("sandbox", checks)
        host.reports(load=load, detail=detail)
        log.info("%s %s serving %d tools", SERVICE, host.instance, len(registry.specs))
        await host.serve_until(stop)


def main() -> None:
    run_service(SERVICE, run, ToolsPySettings)
