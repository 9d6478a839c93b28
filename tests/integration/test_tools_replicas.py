"""Two tools_go_equiv processes: `$SRV.PING` discovery, the queue group spreads calls over both,
and a KB change reaches both replicas' vector caches. They drain cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from shared.bus import Bus
from shared.bus.heartbeat import gather_health
from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, Process, Tools, connected, corpus_doc, service_env


async def collect(bus: Bus, subject: str, window_s: float = 0.5) -> list[dict[str, Any]]:
    inbox = bus.nc.new_inbox()
    sub = await bus.nc.subscribe(inbox)
    await bus.nc.publish(subject, b"", reply=inbox)
    replies: list[dict[str, Any]] = []
    deadline = asyncio.get_running_loop().time() + window_s
    while (left := deadline - asyncio.get_running_loop().time()) > 0:
        try:
            msg = await sub.next_msg(timeout=left)
        except Exception:
            break
        replies.append(json.loads(msg.data))
    await sub.unsubscribe()
    return replies


async def instance_stats(bus: Bus) -> dict[str, dict[str, Any]]:
    replies = await gather_health(bus, "tools-go", window_s=0.5)
    return {r.instance: r.checks["instance"] for r in replies}


async def test_replicas_share_the_load_and_both_see_a_kb_change(settings: Settings, tmp_path: Path) -> None:
    env = service_env(settings)
    async with connected(settings) as bus:
        parser = await InProcess(settings, go=False).start()
        replicas = [Process("services.tools_go_equiv", env, tmp_path / f"go-{i}.log").start() for i in (1, 2)]
        try:
            tools = Tools(bus)
            await tools.ready()
            for _ in range(100):  # both replicas up (each answers health)
                if len(await instance_stats(bus)) == 2:
                    break
            # Discovery with stock NATS tooling subjects.
            ping = Counter(r["name"] for r in await collect(bus, "$SRV.PING"))
            assert ping["tools-go"] >= 2 and ping["tools-py"] >= 1
            info = await collect(bus, "$SRV.INFO.tools-go")
            ours = [i for i in info if any(e["subject"].startswith(settings.subject_prefix) for e in i["endpoints"])]
            assert len(ours) == 2
            assert {"kb_search", "list_tools"} <= {e["name"] for e in ours[0]["endpoints"]}

            await tools("kb_create", name="shared")
            docs = {}
            for stem in ("vacation-policy", "expense-policy", "code-review"):
                out = await tools("kb_ingest", kb="shared", text=corpus_doc(stem).read_text())
                assert (await tools.wait_job(out["job_id"])).status == "done"
                docs[stem] = out["document_id"]
            for _ in range(40):
                hits = await tools("kb_search", kb="shared", query="vacation days carry over", mode="hybrid")
                assert hits["chunks"][0]["doc_id"] == docs["vacation-policy"]
            stats = await instance_stats(bus)
            assert len(stats) == 2
            assert all(s["calls"].get("kb_search", 0) > 0 for s in stats.values()), stats  # the queue group spread them
            assert all(s["kb_cache"]["kbs"] == 1 for s in stats.values()), stats  # both cached the KB
            before = {i: s["kb_cache"]["invalidations"] for i, s in stats.items()}

            await tools("doc_delete", kb="shared", doc_id=docs["vacation-policy"])
            for _ in range(50):
                stats = await instance_stats(bus)
                if all(s["kb_cache"]["invalidations"] > before[i] for i, s in stats.items()):
                    break
            assert all(s["kb_cache"]["invalidations"] > before[i] for i, s in stats.items()), stats
            for _ in range(20):
                hits = await tools("kb_search", kb="shared", query="vacation days carry over", mode="vector")
                assert docs["vacation-policy"] not in {h["doc_id"] for h in hits["chunks"]}
        finally:
            codes = [p.terminate() for p in replicas]
            await parser.stop()
        assert codes == [0, 0], [p.logs() for p in replicas]
