"""Readiness: the gateway has started (its bus side is up), the database, NATS (and Redis when
configured) answer, and a dispatcher is alive."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

PROBE_TIMEOUT_S = 2.0


@dataclass
class Readiness:
    ready: bool
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)


async def _timed(coro: Any) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        detail = await asyncio.wait_for(coro, PROBE_TIMEOUT_S)
    except TimeoutError:
        return {"ok": False, "error": f"no answer within {PROBE_TIMEOUT_S}s"}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    out: dict[str, Any] = {"ok": True, "latency_ms": round((loop.time() - start) * 1000, 2)}
    if isinstance(detail, dict):
        out.update(detail)
    return out


async def probe_db(app: FastAPI) -> dict[str, Any]:
    return await _timed(asyncio.to_thread(app.state.db.ping))


async def probe_nats(app: FastAPI) -> dict[str, Any]:
    bus = app.state.bus

    async def _rtt() -> None:
        if bus is None or not bus.nc.is_connected:
            raise ConnectionError("not connected")
        await bus.nc.flush(timeout=PROBE_TIMEOUT_S)

    return await _timed(_rtt())


async def probe_redis(app: FastAPI) -> dict[str, Any] | None:
    redis = app.state.limiter.redis
    if redis is None:
        return None
    return await _timed(redis.ping())


def dispatcher_check(app: FastAPI) -> dict[str, Any]:
    instances = getattr(app.state, "instances", None)
    live = instances.live("dispatcher") if instances is not None else []
    if live:
        return {"ok": True, "instances": len(live)}
    return {"ok": False, "error": "no fresh dispatcher heartbeat"}


def live_services(app: FastAPI) -> dict[str, int]:
    """Live instances per service by heartbeat: not gating readiness (the gateway takes tasks
    without a tool service), but what `agentix up` waits for before it says the suite is up."""
    instances = getattr(app.state, "instances", None)
    counts: dict[str, int] = {}
    for seen in instances.live() if instances is not None else []:
        counts[seen.beat.service] = counts.get(seen.beat.service, 0) + 1
    return counts


def start_check(app: FastAPI) -> dict[str, Any]:
    """Where the gateway's start is (`shared/startup.py`): ok once it serves; while it waits, the
    phase and what for (NATS that does not answer, a cluster still forming)."""
    host = getattr(app.state, "host", None)
    if host is None:  # the app's lifespan has not run
        return {"ok": False, "state": "starting", "phase": "connecting", "detail": "not started"}
    return host.startup.check()


async def readiness(app: FastAPI, require_dispatcher: bool = True) -> Readiness:
    db, nats_check, redis_check = await asyncio.gather(probe_db(app), probe_nats(app), probe_redis(app))
    checks: dict[str, dict[str, Any]] = {"start": start_check(app), "database": db, "nats": nats_check}
    if redis_check is not None:
        checks["redis"] = redis_check
    if require_dispatcher:
        checks["dispatcher"] = dispatcher_check(app)
    return Readiness(all(c["ok"] for c in checks.values()), checks)
