"""Ingestion throughput: documents/s for ~2 KB Markdown documents through the whole pipeline
(kb_ingest → JetStream work queue → tools_py doc_parse over NATS → chunk → local embedder →
facts → index, progress events included), against bulk-inserting the very rows that pipeline
produced straight into the same database, in the same run. Target: ≥ 0.5×.

The tool services run as separate processes, as deployed. Run:
    python -m bench.ingest [--docs 400] [--db-url postgresql://…] [--replicas 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, insert, select, text

from services.tools_go_equiv.db.schema import chunks, documents, embeddings, facts, kbs
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta
from shared.natsd import NatsServer
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "queue stream consumer replica broker message order invoice sensor reading firmware dashboard backup "
    "restore policy review release deploy rollback cache latency throughput partition merge index search "
    "schema migration token budget model prompt agent workflow retry timeout lease heartbeat health"
).split()
NAMES = ["Orion", "Vega", "Helios", "Atlas", "Toggle", "Northwind Labs", "Acme Corp", "Carla Mendes", "Bob Jones"]


def document(i: int) -> str:
    """A deterministic ~2 KB Markdown document with headings and named entities."""
    rnd = random.Random(i)
    parts = [f"# Runbook {i}: {rnd.choice(NAMES)} {rnd.choice(WORDS)}"]
    while sum(len(p) for p in parts) < 1950:
        if rnd.random() < 0.2:
            parts.append(f"## {rnd.choice(WORDS).title()} {rnd.choice(WORDS)}")
        a, b = rnd.sample(NAMES, 2)
        words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(18, 30)))
        parts.append(f"{a} uses {b} for the {words}. {a} is a {rnd.choice(WORDS)} {rnd.choice(WORDS)}.")
    return "\n\n".join(parts)[:2048]


def spawn(module: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", module], env=env, stdout=out, stderr=out, cwd=ROOT)


async def wait_tools(client: ToolClient) -> None:
    for _ in range(300):
        if {d.service for d in await client.list_tools(timeout_s=1)} >= {"go", "py"}:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("tool services did not start")


async def call(client: ToolClient, tool: str, **args: Any) -> Any:
    reply = await client.call(tool, args, ToolMeta(user_id="bench"), timeout_s=60)
    if not reply.ok:
        raise RuntimeError(f"{tool}: {reply.error}")
    return reply.result


async def run_pipeline(bus: Bus, client: ToolClient, kb: str, docs: list[str]) -> float:
    """Seconds from the first submission until every job reported `done`."""
    pending: set[str] = set()
    finished = asyncio.Event()
    failures: list[str] = []

    async def on_status(msg: Any) -> None:
        event = json.loads(msg.data)
        if event.get("type") == "done" and event["task_id"] in pending:
            if event["status"] != "done":
                failures.append(event.get("error", "?"))
            pending.discard(event["task_id"])
            if not pending and submitted.is_set():
                finished.set()

    submitted = asyncio.Event()
    sub = await bus.nc.subscribe(f"{bus.settings.subject_prefix}.events.*.status", cb=on_status)
    slots = asyncio.Semaphore(32)

    async def submit(i: int, body: str) -> None:
        async with slots:
            out = await call(client, "kb_ingest", kb=kb, text=body, filename=f"doc-{i}.md")
            pending.add(out["job_id"])

    started = time.perf_counter()
    await asyncio.gather(*(submit(i, d) for i, d in enumerate(docs)))
    submitted.set()
    if pending:
        await asyncio.wait_for(finished.wait(), 600)
    elapsed = time.perf_counter() - started
    await sub.unsubscribe()
    if failures:
        raise RuntimeError(f"{len(failures)} jobs failed: {failures[:3]}")
    return elapsed


def bulk_insert(url: str, source_kb: str, per_document: bool) -> tuple[float, int]:
    """Copy the pipeline's rows for `source_kb` into a new KB with plain bulk inserts (executemany
    per table) — all in one transaction, or one transaction per document (the unit the pipeline
    makes durable). Returns (seconds spent inserting, rows inserted); reading is not timed."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        kb = conn.execute(select(kbs).where(kbs.c.id == source_kb)).one()
        docs = [dict(r._mapping) for r in conn.execute(select(documents).where(documents.c.kb_id == source_kb))]
        rows = [dict(r._mapping) for r in conn.execute(select(chunks).where(chunks.c.kb_id == source_kb))]
        vecs = [dict(r._mapping) for r in conn.execute(select(embeddings).where(embeddings.c.kb_id == source_kb))]
        fact_rows = [dict(r._mapping) for r in conn.execute(select(facts).where(facts.c.kb_id == source_kb))]
        base_id = conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM kb_chunks")).scalar_one() + 1_000_000
    new_kb = "kb_bulk" + os.urandom(6).hex()
    doc_ids = {d["id"]: "doc_bulk" + os.urandom(6).hex() for d in docs}
    chunk_ids = {c["id"]: base_id + i for i, c in enumerate(rows)}
    doc_of = {c["id"]: c["document_id"] for c in rows}
    kb_row = dict(kb._mapping) | {"id": new_kb, "name": new_kb}
    per_doc: dict[str, dict[str, list[dict[str, Any]]]] = {
        d["id"]: {"documents": [d | {"id": doc_ids[d["id"]], "kb_id": new_kb}], "chunks": [], "embeddings": [],
                  "fts": [], "facts": []}
        for d in docs
    }  # fmt: skip
    for c in rows:
        new = {k: v for k, v in c.items() if k != "tsv"}
        new |= {"id": chunk_ids[c["id"]], "kb_id": new_kb, "document_id": doc_ids[c["document_id"]]}
        per_doc[c["document_id"]]["chunks"].append(new)
        per_doc[c["document_id"]]["fts"].append({"id": new["id"], "heading": new["heading"], "text": new["text"]})
    for v in vecs:
        per_doc[doc_of[v["chunk_id"]]]["embeddings"].append(v | {"chunk_id": chunk_ids[v["chunk_id"]], "kb_id": new_kb})
    for f in fact_rows:
        new = {k: v for k, v in f.items() if k != "id"}
        new |= {"kb_id": new_kb, "document_id": doc_ids[f["document_id"]], "chunk_id": chunk_ids[f["chunk_id"]]}
        per_doc[f["document_id"]]["facts"].append(new)
    groups = list(per_doc.values())
    if not per_document:  # one group holding everything
        groups = [{k: [r for g in groups for r in g[k]] for k in groups[0]}]
    fts_sql = text("INSERT INTO kb_chunks_fts(rowid, heading, text) VALUES (:id, :heading, :text)")
    with engine.begin() as conn:
        conn.execute(insert(kbs), [kb_row])
    started = time.perf_counter()
    for group in groups:
        with engine.begin() as conn:
            conn.execute(insert(documents), group["documents"])
            conn.execute(insert(chunks), group["chunks"])
            conn.execute(insert(embeddings), group["embeddings"])
            if sqlite:
                conn.execute(fts_sql, group["fts"])
            if group["facts"]:
                conn.execute(insert(facts), group["facts"])
    elapsed = time.perf_counter() - started
    engine.dispose()
    count = sum(len(g[k]) for g in groups for k in g if sqlite or k != "fts")
    return elapsed, count


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.ERROR)  # the client's "not up yet" warnings while services start
    work = Path(tempfile.mkdtemp(prefix="agentix-bench-ingest-"))
    nats = NatsServer(work / "nats").start()
    settings = Settings(
        nats_servers=[nats.url], subject_prefix="benchingest", data_dir=work / "data",
        tools_db_url=args.db_url, ingest_max_ack_pending=args.concurrency * args.replicas,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")} | {
        "AGENTIX_NATS_SERVERS": nats.url,
        "AGENTIX_SUBJECT_PREFIX": settings.subject_prefix,
        "AGENTIX_DATA_DIR": str(settings.data_dir),
        "AGENTIX_INGEST_MAX_ACK_PENDING": str(settings.ingest_max_ack_pending),
        "AGENTIX_KB_INGEST_CONCURRENCY": str(args.concurrency),
        "AGENTIX_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    if args.db_url:
        env["AGENTIX_TOOLS_DB_URL"] = args.db_url
    bus = await Bus.connect(settings, name="bench")
    await bus.declare()
    procs = [spawn("services.tools_py", env, work / "tools-py.log")]
    procs += [spawn("services.tools_go_equiv", env, work / f"tools-go-{i}.log") for i in range(args.replicas)]
    try:
        client = ToolClient(bus)
        await wait_tools(client)
        warm = await call(client, "kb_create", name="warmup")
        await run_pipeline(bus, client, warm["id"], [document(10_000 + i) for i in range(20)])
        kb = await call(client, "kb_create", name="pipeline")
        docs = [document(i) for i in range(args.docs)]
        pipeline_s = await run_pipeline(bus, client, kb["id"], docs)
        bulk_s, row_count = bulk_insert(settings.db_url("tools"), kb["id"], per_document=False)
        per_doc_s, _ = bulk_insert(settings.db_url("tools"), kb["id"], per_document=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        await bus.close()
        nats.cleanup()
    pipe_rate, bulk_rate, per_doc_rate = args.docs / pipeline_s, args.docs / bulk_s, args.docs / per_doc_s
    ratio, ratio_doc = pipe_rate / bulk_rate, pipe_rate / per_doc_rate
    db = "postgresql" if args.db_url else "sqlite"
    print(f"ingest benchmark: {args.docs} docs of ~2 KB markdown, {db}, {args.replicas} tools-go replica(s)")
    print(f"  pipeline (queue → parse → chunk → embed → index):  {pipeline_s:7.2f} s  {pipe_rate:8.1f} docs/s")
    print(f"  bulk insert of the same {row_count} rows, one tx:    {bulk_s:7.2f} s  {bulk_rate:8.1f} docs/s")
    print(f"  bulk insert of the same rows, one tx per document: {per_doc_s:7.2f} s  {per_doc_rate:8.1f} docs/s")
    verdict = "met" if ratio >= 0.5 else "NOT met"
    print(f"  ratio pipeline / bulk (one tx)      = {ratio:.2f}x  (target >= 0.5x: {verdict})")
    print(f"  ratio pipeline / bulk (tx per doc)  = {ratio_doc:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--db-url", default=None, help="tools DB (default: SQLite in a temp dir)")
    parser.add_argument("--replicas", type=int, default=1, help="tools-go processes")
    parser.add_argument("--concurrency", type=int, default=4, help="jobs in flight per replica")
    asyncio.run(main(parser.parse_args()))
