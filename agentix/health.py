"""`agentix health SERVICE`: the container healthcheck — does this host's instance answer ok?"""

from __future__ import annotations

import asyncio
import socket

from shared.bus import Bus
from shared.bus.heartbeat import gather_health
from shared.settings import Settings


async def _check(service: str) -> bool:
    settings = Settings(nats_connect_timeout_s=3)
    bus = await Bus.connect(settings, name=f"healthcheck-{service}")
    try:
        replies = await gather_health(bus, service, window_s=1.0)
    finally:
        await bus.close()
    host = socket.gethostname()
    return any(r.ok and r.instance.startswith(f"{host}-") for r in replies)


def check_local_health(service: str) -> int:
    try:
        return 0 if asyncio.run(_check(service)) else 1
    except Exception as exc:
        print(f"unhealthy: {exc}")
        return 1
