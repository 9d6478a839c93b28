"""tools_go_equiv: on the service host (connect, declare, heartbeat, health, drain), create
tables, serve the tools, run the ingestion worker, listen for KB changes, bridge the external MCP
servers the control plane names; drain everything on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from nats.aio.msg import Msg

from services.tools_go_equiv import runtime, tools
from services.tools_go_equiv.db import Db, create_schema
from services.tools_go_equiv.ingest.worker import IngestWorker
from services.tools_go_equiv.kb.embed import Embedders
from services.tools_go_equiv.kb.llm_facts import LlmFactExtractor
from services.tools_go_equiv.kb.rerank import Reranker
from services.tools_go_equiv.kb.search import Searcher
from services.tools_go_equiv.kb.vectors import VectorCache
from services.tools_go_equiv.mcp_bridge.bridge import McpBridge
from services.tools_go_equiv.mcp_bridge.timing import Timing
from services.tools_go_equiv.registry import registry, with_bridged
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.tools import ToolClient, serve_tools
from shared.contract.heartbeat import Load
from shared.contract.ingest import KbChanged
from shared.runtime import run_service
from shared.service_host import ServiceHost
from shared.settings import ToolsGoSettings

SERVICE = "tools-go"
log = logging.getLogger("agentix.tools_go")
assert tools  # importing the package declared the tools


async def start_runtime(settings: ToolsGoSettings, bus: Bus) -> runtime.Runtime:
    db = Db(settings.db_url("tools"))
    await asyncio.to_thread(create_schema, db)
    vectors = VectorCache(db, settings.kb_vector_cache_rows)
    redis = None
    if settings.redis_url:  # the client library (~9 MB resident) only where Redis is configured
        from redis.asyncio import Redis

        redis = Redis.from_url(settings.redis_url, decode_responses=True)
    rt = runtime.Runtime(
        settings=settings,
        bus=bus,
        db=db,
        embedders=Embedders(settings),
        vectors=vectors,
        searcher=Searcher(db, vectors, settings.kb_rrf_k, Reranker.from_settings(settings), settings.kb_rerank_depth),
        tools=ToolClient(bus, services=("py",)),
        redis=redis,
        fact_model=LlmFactExtractor.from_settings(settings),
    )
    runtime.install(rt)
    return rt


async def run(settings: ToolsGoSettings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    async with ServiceHost(settings, SERVICE, stop=stop) as host:
        bus = host.bus
        rt = await start_runtime(settings, bus)
        host.on_release("runtime", lambda: runtime.install(None))
        host.on_release("database", rt.db.close)
        host.on_release("database writer", rt.db.group.drain)  # released first: queued writes commit
        if rt.redis is not None:
            host.on_release("redis", rt.redis.aclose)

        async def on_change(msg: Msg) -> None:
            with contextlib.suppress(Exception):
                rt.vectors.invalidate(KbChanged.from_bytes(msg.data).kb)

        # No queue group: every replica must drop its cached vectors (until the drain is over).
        changes = await bus.nc.subscribe(bus.subjects.kb_changed("*"), cb=on_change)
        host.on_release("kb change listener", changes.unsubscribe)
        # The bridge gives up on an MCP call before its callers do, so they get its clear error.
        timing = Timing(call_s=max(1.0, settings.tool_timeout_s - 5.0))
        from services.tools_go_equiv.mcp_bridge.sampling import Sampler  # the MCP SDK's types: with the bridge

        bridge = McpBridge(bus, settings.persistent_secret("secret_key"), settings.tool_concurrency, timing,
                           work_root=settings.data_dir / "mcp-stdio", sampler=Sampler.from_settings(settings))
        server = await serve_tools(bus, with_bridged(bridge.descriptors))
        host.on_drain("tool calls", server.drain)
        # Drained before this service's own tool calls (newest first), after the worker.
        host.on_drain("MCP bridge", bridge.stop)
        control = ControlPlane(bus)
        host.on_release("control plane", control.stop)
        await control.watch(bridge.apply)  # returns once the registered servers are applied
        worker = IngestWorker(rt)
        await worker.start()
        # Drained before the tool calls (newest first): a batch may still be answering them.
        host.on_drain("ingestion worker", worker.stop)

        def load() -> Load:
            calls = sum(m.calls for m in server.metrics.values())
            calls += sum(conn.stats.calls for conn in bridge.servers.values())
            return Load(inflight=server.inflight + worker.inflight + bridge.inflight, done=calls + worker.done)

        def detail() -> dict[str, Any]:
            return {
                "calls": {name: m.calls for name, m in server.metrics.items() if m.calls},
                "kb_cache": rt.vectors.stats(),
                "ingest": {"inflight": worker.inflight, "done": worker.done, "failed": worker.failed},
                "mcp": bridge.status(),
            }

        async def checks() -> dict[str, Any]:
            result: dict[str, Any] = {}
            try:
                await asyncio.to_thread(rt.db.ping)
                result["db"] = {"ok": True, "dialect": rt.db.dialect}
            except Exception as exc:
                result["db"] = {"ok": False, "error": type(exc).__name__}
            if rt.redis is not None:
                try:
                    await rt.redis.ping()
                    result["redis"] = {"ok": True}
                except Exception as exc:
                    result["redis"] = {"ok": False, "error": type(exc).__name__}
            result["instance"] = {"ok": True, **detail()}
            return result

        host.checks("storage", checks)
        host.reports(load=load, detail=detail)
        log.info("%s %s serving %d tools (db %s)", SERVICE, host.instance, len(registry.specs), rt.db.dialect)
        await host.serve_until(stop)


def main() -> None:
    run_service(SERVICE, run, ToolsGoSettings)
