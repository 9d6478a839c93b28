"""tools_go_equiv: connect, declare, create tables, serve the tools, run the ingestion worker,
listen for KB changes, heartbeat, answer health; drain everything on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from nats.aio.msg import Msg
from redis.asyncio import Redis

from services.tools_go_equiv import runtime, tools
from services.tools_go_equiv.config import KbSettings
from services.tools_go_equiv.db import Db, create_schema
from services.tools_go_equiv.ingest.worker import IngestWorker
from services.tools_go_equiv.kb.embed import Embedders
from services.tools_go_equiv.kb.llm_facts import LlmFactExtractor
from services.tools_go_equiv.kb.rerank import Reranker
from services.tools_go_equiv.kb.search import Searcher
from services.tools_go_equiv.kb.vectors import VectorCache
from services.tools_go_equiv.registry import registry
from shared.bus import Bus
from shared.bus.heartbeat import Heartbeater, new_instance_id, serve_health
from shared.bus.tools import ToolClient, serve_tools
from shared.contract.heartbeat import Load
from shared.contract.ingest import KbChanged
from shared.runtime import run_service
from shared.settings import Settings

SERVICE = "tools-go"
log = logging.getLogger("agentix.tools_go")
assert tools  # importing the package declared the tools


async def start_runtime(settings: Settings, bus: Bus, kb_settings: KbSettings | None = None) -> runtime.Runtime:
    kb = kb_settings or KbSettings()
    db = Db(settings.db_url("tools"))
    await asyncio.to_thread(create_schema, db)
    vectors = VectorCache(db, kb.vector_cache_rows)
    redis = Redis.from_url(settings.redis_url, decode_responses=True) if settings.redis_url else None
    rt = runtime.Runtime(
        settings=settings,
        kb=kb,
        bus=bus,
        db=db,
        embedders=Embedders(settings, kb),
        vectors=vectors,
        searcher=Searcher(db, vectors, kb.rrf_k, Reranker.from_settings(settings, kb), kb.rerank_depth),
        tools=ToolClient(bus, services=("py",)),
        redis=redis,
        fact_model=LlmFactExtractor.from_settings(settings, kb),
    )
    runtime.install(rt)
    return rt


async def run(settings: Settings, stop: asyncio.Event | None = None, kb_settings: KbSettings | None = None) -> None:
    stop = stop or asyncio.Event()
    bus = await Bus.connect(settings, name=SERVICE)
    await bus.declare()
    rt = await start_runtime(settings, bus, kb_settings)
    instance = new_instance_id(SERVICE)

    async def on_change(msg: Msg) -> None:
        with contextlib.suppress(Exception):
            rt.vectors.invalidate(KbChanged.from_bytes(msg.data).kb)

    # No queue group: every replica must drop its cached vectors.
    changes = await bus.nc.subscribe(bus.subjects.kb_changed("*"), cb=on_change)
    server = await serve_tools(bus, registry)
    worker = IngestWorker(rt)
    await worker.start()

    def load() -> Load:
        calls = sum(m.calls for m in server.metrics.values())
        return Load(inflight=server.inflight + worker.inflight, done=calls + worker.done)

    def detail() -> dict[str, Any]:
        return {
            "calls": {name: m.calls for name, m in server.metrics.items() if m.calls},
            "kb_cache": rt.vectors.stats(),
            "ingest": {"inflight": worker.inflight, "done": worker.done, "failed": worker.failed},
        }

    async def checks() -> dict[str, Any]:
        result: dict[str, Any] = {"nats": {"ok": bus.connected}}
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

    beats = Heartbeater(bus, SERVICE, instance, load=load, detail=detail)
    beats.start()
    health = await serve_health(bus, SERVICE, instance, checks)
    log.info("%s %s serving %d tools (db %s)", SERVICE, instance, len(registry.specs), rt.db.dialect)
    try:
        await stop.wait()
    finally:
        log.info("%s draining", SERVICE)
        await worker.stop()
        await server.drain()
        for sub in (health, changes):
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        await beats.stop()
        await bus.close()
        if rt.redis is not None:
            await rt.redis.aclose()
        rt.db.close()
        runtime.install(None)


def main() -> None:
    run_service(SERVICE, run)
