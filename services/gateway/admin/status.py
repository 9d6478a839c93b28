"""The operator's view: live instances from heartbeats, infrastructure probes, the tool registry
(`$SRV.INFO`/`$SRV.STATS` of the `tools-go`/`tools-py` micro services), breaker states that
dispatchers report in their heartbeat detail, the external MCP servers as the tools-go replicas'
bridges report them, and the work queues with their dead letters."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlparse

from fastapi import FastAPI
from nats.js.errors import NotFoundError

from services.gateway.fleet.readiness import probe_db, probe_nats, probe_redis, start_check
from shared.bus import Bus

TOOL_SERVICES = ("tools-go", "tools-py")
DISCOVERY_WINDOW_S = 0.3


async def _discover(bus: Bus, verb: str, service: str) -> list[dict[str, Any]]:
    """Every instance answers `$SRV.<verb>.<service>`: collect for a short window."""
    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox)
    replies: list[dict[str, Any]] = []
    try:
        await bus.nc.publish(f"$SRV.{verb}.{service}", b"", reply=inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DISCOVERY_WINDOW_S
        while (left := deadline - loop.time()) > 0:
            try:
                msg = await sub.next_msg(timeout=left)
            except Exception:
                break
            with contextlib.suppress(ValueError):
                replies.append(json.loads(msg.data))
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
    return replies


def _ours(bus: Bus, endpoint: dict[str, Any]) -> bool:
    # Several deployments may share one NATS: keep endpoints under our subject prefix.
    return str(endpoint.get("subject", "")).startswith(bus.subjects.prefix + ".")


async def tool_registry(bus: Bus) -> dict[str, Any]:
    services = await asyncio.gather(*(_tool_service(bus, name) for name in TOOL_SERVICES))
    return dict(zip(TOOL_SERVICES, services, strict=True))


async def _tool_service(bus: Bus, service: str) -> dict[str, Any]:
    stats, infos = await asyncio.gather(_discover(bus, "STATS", service), _discover(bus, "INFO", service))
    metadata: dict[str, Any] = {}
    versions: set[str] = set()
    for info in infos:
        endpoints = [e for e in info.get("endpoints") or [] if _ours(bus, e)]
        if endpoints:
            versions.add(str(info.get("version")))
        for ep in endpoints:
            metadata[str(ep.get("name"))] = ep.get("metadata") or {}
    instances: set[str] = set()
    tools: dict[str, dict[str, Any]] = {}
    for reply in stats:
        endpoints = [e for e in reply.get("endpoints") or [] if _ours(bus, e)]
        if not endpoints:
            continue
        instances.add(str(reply.get("id")))
        for ep in endpoints:
            name = str(ep.get("name"))
            agg = tools.setdefault(
                name, {"name": name, "subject": ep.get("subject"), "requests": 0, "errors": 0, "_ms": 0.0}
            )
            # The tool server answers work in background tasks and reports its own counts in
            # `data` (micro's counters only see the admission); fall back to micro's.
            data = ep.get("data") if isinstance(ep.get("data"), dict) else {}
            calls = int(data.get("calls", ep.get("num_requests", 0)) or 0)
            agg["requests"] += calls
            agg["errors"] += int(data.get("errors", 0) or 0) + int(ep.get("num_errors", 0) or 0)
            if "avg_ms" in data:
                agg["_ms"] += float(data["avg_ms"]) * calls
            else:
                agg["_ms"] += int(ep.get("processing_time", 0) or 0) / 1e6
            last_error = data.get("last_error") or ep.get("last_error")
            if last_error:
                agg["last_error"] = last_error
    for agg in tools.values():
        total_ms = agg.pop("_ms")
        agg["avg_latency_ms"] = round(total_ms / agg["requests"], 3) if agg["requests"] else None
        agg["metadata"] = metadata.get(agg["name"], {})
    return {
        "instances": len(instances),
        "versions": sorted(versions),
        "tools": sorted(tools.values(), key=lambda t: t["name"]),
    }


async def probe_otlp(endpoint: str | None) -> dict[str, Any]:
    if not endpoint:
        return {"ok": True, "configured": False}
    parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
    host, port = parsed.hostname or "localhost", parsed.port or (443 if parsed.scheme == "https" else 4318)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
    except (OSError, TimeoutError) as exc:
        return {"ok": False, "configured": True, "endpoint": endpoint, "error": str(exc)[:200]}
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return {"ok": True, "configured": True, "endpoint": endpoint}


def breakers(instances: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model: the state each dispatcher reports (worst first) and recent failures."""
    rank = {"open": 0, "half_open": 1, "closed": 2}
    models: dict[str, dict[str, Any]] = {}
    for inst in instances:
        if inst["service"] != "dispatcher":
            continue
        raw = inst["detail"].get("breakers") or []
        items = list(raw.values()) if isinstance(raw, dict) else list(raw)
        for b in items:
            if not isinstance(b, dict) or "model" not in b:
                continue
            entry = models.setdefault(b["model"], {"model": b["model"], "state": "closed", "instances": []})
            entry["instances"].append({"instance": inst["instance"], **b})
            if rank.get(b.get("state", "closed"), 2) < rank.get(entry["state"], 2):
                entry["state"] = b.get("state")
    return models


def mcp_servers(instances: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per external MCP server, summed over the bridges of the live tools-go replicas: `state`
    is `connected` (every bridge holds a session), `degraded` (some do), `down` (none) or
    `disabled`; tools, calls, errors, mean latency, and the last error a bridge saw."""
    servers: dict[str, dict[str, Any]] = {}
    disabled: set[str] = set()
    for inst in instances:
        if inst["service"] != "tools-go":
            continue
        report = inst["detail"].get("mcp") or {}
        disabled.update(report.get("disabled") or [])
        for s in report.get("servers") or []:
            if not isinstance(s, dict) or "name" not in s:
                continue
            entry = servers.setdefault(s["name"], {
                "name": s["name"], "url": s.get("url"), "bridges": 0, "connected_bridges": 0, "tools": 0,
                "calls": 0, "errors": 0, "_ms": 0.0, "last_error": None,
            })  # fmt: skip
            calls = int(s.get("calls") or 0)
            entry["bridges"] += 1
            entry["connected_bridges"] += 1 if s.get("connected") else 0
            entry["tools"] = max(entry["tools"], int(s.get("tools") or 0))
            entry["calls"] += calls
            entry["errors"] += int(s.get("errors") or 0)
            entry["_ms"] += float(s.get("avg_latency_ms") or 0.0) * calls
            entry["last_error"] = s.get("last_error") or entry["last_error"]
    for entry in servers.values():
        total_ms = entry.pop("_ms")
        entry["avg_latency_ms"] = round(total_ms / entry["calls"], 3) if entry["calls"] else None
        up, bridges = entry["connected_bridges"], entry["bridges"]
        entry["connected"] = up == bridges
        entry["state"] = "connected" if up == bridges else "degraded" if up else "down"
    for name in disabled - set(servers):
        servers[name] = {"name": name, "state": "disabled", "connected": False, "bridges": 0, "tools": 0}
    return sorted(servers.values(), key=lambda e: e["name"])


async def _consumer(bus: Bus, stream: str, durable: str) -> dict[str, Any]:
    try:
        info = await bus.js.consumer_info(stream, durable, timeout=2)
    except NotFoundError:
        return {"ok": False, "error": "not declared"}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {
        "ok": True,
        "waiting": info.num_pending or 0,  # not yet handed to a worker
        "in_flight": info.num_ack_pending or 0,  # handed out, not yet acked
        "redelivered": info.num_redelivered or 0,  # in flight after at least one failed attempt
    }


async def queues(bus: Bus | None) -> dict[str, Any]:
    """Each work queue (tasks → dispatchers, ingest → tools-go) with its dead letters: messages
    that used up their deliveries and wait for a live worker to record them `failed`."""
    if bus is None or not bus.nc.is_connected:
        return {}
    names = bus.names
    pairs = {"tasks": (names.tasks_stream, names.dispatcher_consumer),
             "ingest": (names.ingest_stream, names.ingest_consumer)}  # fmt: skip
    found = await asyncio.gather(*(
        asyncio.gather(_consumer(bus, stream, durable), _consumer(bus, names.dead_stream, names.dead_consumer(durable)))
        for stream, durable in pairs.values()
    ))  # fmt: skip
    out: dict[str, Any] = {}
    for queue, (work, dead) in zip(pairs, found, strict=True):
        out[queue] = work | {"dead_letters": (dead["waiting"] + dead["in_flight"]) if dead["ok"] else None}
    return out


async def status(app: FastAPI) -> dict[str, Any]:
    st = app.state
    registry = st.instances  # None while the gateway is starting: no heartbeat seen yet
    live = [registry.describe(s) for s in registry.live()] if registry is not None else []
    lost = [registry.describe(s) for s in registry.lost()] if registry is not None else []
    db, nats_check, redis_check, otlp, work_queues = await asyncio.gather(
        probe_db(app), probe_nats(app), probe_redis(app), probe_otlp(st.settings.otlp_endpoint), queues(st.bus)
    )
    infra = {"gateway": start_check(app), "database": db, "nats": nats_check,
             "redis": redis_check or {"ok": True, "configured": False}}
    infra["otlp"] = otlp
    tools = await tool_registry(st.bus) if st.bus is not None and st.bus.nc.is_connected else {}
    return {
        "queues": work_queues,
        "instances": sorted(live, key=lambda i: (i["service"], i["instance"])),
        "lost": lost,
        "infrastructure": infra,
        "tools": tools,
        "breakers": breakers(live),
        "mcp_servers": mcp_servers(live),
    }
