"""Ingestion throughput: documents/s for ~2 KB Markdown documents through the whole pipeline
(kb_ingest → JetStream work queue → tools_py doc_parse over NATS → chunk → local embedder →
facts → index, progress events included), against bulk-loading the very rows that pipeline
produced (documents, jobs, chunks, vectors, full-text rows, facts) straight into the same
database, in the same run — the way a careful loader would: one statement per table, COPY on
PostgreSQL, the service's engine settings; the median of three loads. Target: ≥ 0.5×.

The tool services run as separate processes, as deployed; the CPU each process spent per
document is printed too (Linux), which shows where the time goes. Run:
    python -m bench.ingest [--docs 400] [--db-url postgresql://…] [--replicas 1] [--max-ack-pending 64] [--batch 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select, text

from services.tools_go_equiv.db.schema import chunks, documents, embeddings, facts, jobs, kbs
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta
from shared.db import make_engine
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


async def run_pipeline(bus: Bus, client: ToolClient, kb: str, docs: list[str], batch: int = 1) -> float:
    """Seconds from the first submission until every job reported `done` (a job's `done` event
    may arrive before its kb_ingest reply does: both are remembered). `batch` > 1 submits that
    many documents per `kb_ingest_many` call, as a bulk upload does."""
    submitted: set[str] = set()
    finished: dict[str, str] = {}  # job → status
    all_done = asyncio.Event()

    def check() -> None:
        if len(submitted) == len(docs) and submitted <= finished.keys():
            all_done.set()

    async def on_status(msg: Any) -> None:
        event = json.loads(msg.data)
        if event.get("type") == "done":
            finished[event["task_id"]] = event["status"] if event["status"] == "done" else event.get("error", "?")
            check()

    sub = await bus.nc.subscribe(f"{bus.settings.subject_prefix}.events.*.status", cb=on_status)
    slots = asyncio.Semaphore(32 if batch == 1 else 4)

    async def submit(first: int) -> None:
        async with slots:
            part = [{"text": d, "filename": f"doc-{first + i}.md"} for i, d in enumerate(docs[first : first + batch])]
            if batch == 1:
                jobs = [(await call(client, "kb_ingest", kb=kb, **part[0]))["job_id"]]
            else:
                out = await call(client, "kb_ingest_many", kb=kb, documents=part)
                jobs = [item["job_id"] for item in out["items"]]
            submitted.update(jobs)
            check()

    started = time.perf_counter()
    await asyncio.gather(*(submit(first) for first in range(0, len(docs), batch)))
    await asyncio.wait_for(all_done.wait(), 600)
    elapsed = time.perf_counter() - started
    await sub.unsubscribe()
    failures = [finished[j] for j in submitted if finished[j] != "done"]
    if failures:
        raise RuntimeError(f"{len(failures)} jobs failed: {failures[:3]}")
    return elapsed


Rows = dict[str, list[dict[str, Any]]]  # table → rows
TABLES = ("kb_documents", "kb_ingest_jobs", "kb_chunks", "kb_embeddings", "kb_chunks_fts", "kb_facts")


def read_rows(engine: Engine, source_kb: str) -> tuple[dict[str, Any], dict[str, Rows]]:
    """The KB row and, per document, every row the pipeline wrote for it (document, job, chunks,
    vectors, full-text rows on SQLite, facts)."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        kb = dict(conn.execute(select(kbs).where(kbs.c.id == source_kb)).one()._mapping)

        def rows(table: Any) -> list[dict[str, Any]]:
            found = conn.execute(select(table).where(table.c.kb_id == source_kb))
            return [{k: v for k, v in r._mapping.items() if k != "tsv"} for r in found]  # tsv is generated

        per_doc: dict[str, Rows] = {d["id"]: {t: [d] if t == "kb_documents" else [] for t in TABLES}
                                    for d in rows(documents)}  # fmt: skip
        for table in (jobs, chunks, facts):
            for row in rows(table):
                per_doc[row["document_id"]][table.name].append(row)
        doc_of = {c["id"]: doc for doc, group in per_doc.items() for c in group["kb_chunks"]}
        for row in rows(embeddings):
            per_doc[doc_of[row["chunk_id"]]]["kb_embeddings"].append(row)
        if sqlite:
            for group in per_doc.values():
                group["kb_chunks_fts"] = [{"rowid": c["id"], "heading": c["heading"], "text": c["text"]}
                                          for c in group["kb_chunks"]]  # fmt: skip
    return kb, per_doc


def fresh_copy(engine: Engine, per_doc: dict[str, Rows], kb_id: str) -> list[Rows]:
    """The same rows under new ids in KB `kb_id`. Chunk ids are assigned here, as a bulk loader
    does, so vectors, full-text rows and facts can reference them without a round trip."""
    with engine.connect() as conn:
        next_id = int(conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM kb_chunks")).scalar_one()) + 1
    suffix = os.urandom(5).hex()
    out: list[Rows] = []
    for doc, group in per_doc.items():
        doc_id, chunk_ids = f"{doc}_{suffix}", {}
        for c in group["kb_chunks"]:
            chunk_ids[c["id"]], next_id = next_id, next_id + 1
        out.append({
            "kb_documents": [r | {"id": doc_id, "kb_id": kb_id} for r in group["kb_documents"]],
            "kb_ingest_jobs": [r | {"id": f"{r['id']}_{suffix}", "kb_id": kb_id, "document_id": doc_id}
                               for r in group["kb_ingest_jobs"]],
            "kb_chunks": [r | {"id": chunk_ids[r["id"]], "kb_id": kb_id, "document_id": doc_id}
                          for r in group["kb_chunks"]],
            "kb_embeddings": [r | {"chunk_id": chunk_ids[r["chunk_id"]], "kb_id": kb_id}
                              for r in group["kb_embeddings"]],
            "kb_chunks_fts": [r | {"rowid": chunk_ids[r["rowid"]]} for r in group["kb_chunks_fts"]],
            "kb_facts": [{k: v for k, v in r.items() if k != "id"}
                         | {"kb_id": kb_id, "document_id": doc_id, "chunk_id": chunk_ids[r["chunk_id"]]}
                         for r in group["kb_facts"]],
        })  # fmt: skip
    return out


def load(engine: Engine, groups: list[Rows]) -> None:
    """A careful bulk loader: each group in one transaction, every table in one statement —
    COPY on PostgreSQL, executemany of one prepared INSERT on SQLite."""
    for group in groups:
        with engine.begin() as conn:
            dbapi = conn.connection.driver_connection
            for table in TABLES:
                rows = group[table]
                if not rows:
                    continue
                cols = list(rows[0])
                if engine.dialect.name == "sqlite":
                    marks = ", ".join("?" * len(cols))
                    dbapi.executemany(  # type: ignore[union-attr]
                        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})", [tuple(r.values()) for r in rows]
                    )
                else:
                    with dbapi.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:  # type: ignore[union-attr]
                        for r in rows:
                            copy.write_row(tuple(r.values()))


def bulk_insert(url: str, source_kb: str, per_document: bool, runs: int = 3) -> tuple[float, int]:
    """Load the rows the pipeline produced for `source_kb` into fresh KBs, all in one transaction
    or one transaction per document (the unit the pipeline acks), with the service's own engine
    settings. Returns (median seconds of `runs` loads, rows per load); reading is not timed."""
    engine = make_engine(url)
    kb, per_doc = read_rows(engine, source_kb)
    times, count = [], 0
    for _ in range(runs):
        kb_id = "kb_bulk" + os.urandom(6).hex()
        with engine.begin() as conn:
            conn.execute(insert(kbs), [kb | {"id": kb_id, "name": kb_id}])
        groups = fresh_copy(engine, per_doc, kb_id)
        count = sum(len(rows) for g in groups for rows in g.values())
        if not per_document:  # one group holding everything
            groups = [{t: [r for g in groups for r in g[t]] for t in TABLES}]
        started = time.perf_counter()
        load(engine, groups)
        times.append(time.perf_counter() - started)
    engine.dispose()
    return statistics.median(times), count


@contextlib.contextmanager
def scratch_database(url: str | None) -> Iterator[str | None]:
    """A PostgreSQL URL → a fresh database on that server for this run, dropped afterwards (every
    run starts from empty tables, like the SQLite file in a temp dir)."""
    if not url:
        yield None
        return
    import psycopg

    plain = url.replace("postgresql+psycopg://", "postgresql://")
    name = f"agentix_bench_{os.urandom(4).hex()}"
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{plain.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def main(args: argparse.Namespace) -> None:
    with scratch_database(args.db_url) as db_url:
        await run(args, db_url)


async def run(args: argparse.Namespace, db_url: str | None) -> None:
    logging.basicConfig(level=logging.ERROR)  # the client's "not up yet" warnings while services start
    work = Path(tempfile.mkdtemp(prefix="agentix-bench-ingest-"))
    nats = NatsServer(work / "nats").start()
    procs: list[subprocess.Popen[bytes]] = []
    bus: Bus | None = None
    try:
        settings = Settings(
            nats_servers=[nats.url], subject_prefix="benchingest", data_dir=work / "data",
            tools_db_url=db_url, ingest_max_ack_pending=args.max_ack_pending,
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
        if db_url:
            env["AGENTIX_TOOLS_DB_URL"] = db_url
        bus = await Bus.connect(settings, name="bench")
        await bus.declare()
        procs.append(spawn("services.tools_py", env, work / "tools-py.log"))
        procs += [spawn("services.tools_go_equiv", env, work / f"tools-go-{i}.log") for i in range(args.replicas)]
        client = ToolClient(bus)
        await wait_tools(client)
        warm = await call(client, "kb_create", name="warmup")
        await run_pipeline(bus, client, warm["id"], [document(10_000 + i) for i in range(20)])
        kb = await call(client, "kb_create", name="pipeline")
        docs = [document(i) for i in range(args.docs)]
        pids = {"bench client": os.getpid(), "nats-server": nats.proc.pid if nats.proc else 0} | {
            ("tools-py" if i == 0 else f"tools-go-{i}"): p.pid for i, p in enumerate(procs)
        }
        cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
        pipeline_s = await run_pipeline(bus, client, kb["id"], docs)
        cpu = {k: (cpu_seconds(pid) - cpu0[k]) * 1000 / args.docs for k, pid in pids.items()}
        batched_kb = await call(client, "kb_create", name="pipeline-batched")
        batched_s = await run_pipeline(bus, client, batched_kb["id"], docs, batch=args.batch)
        bulk_s, row_count = bulk_insert(settings.db_url("tools"), kb["id"], per_document=False)
        per_doc_s, _ = bulk_insert(settings.db_url("tools"), kb["id"], per_document=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        if bus is not None:
            await bus.close()
        nats.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    pipe_rate, bulk_rate, per_doc_rate = args.docs / pipeline_s, args.docs / bulk_s, args.docs / per_doc_s
    ratio, ratio_doc = pipe_rate / bulk_rate, pipe_rate / per_doc_rate
    batched_rate = args.docs / batched_s
    db = "postgresql" if args.db_url else "sqlite"
    print(
        f"ingest benchmark: {args.docs} docs of ~2 KB markdown, {db}, {args.replicas} tools-go replica(s), "
        f"max_ack_pending {args.max_ack_pending}, {args.concurrency} batches in flight per replica"
    )
    print(f"  pipeline (queue → parse → chunk → embed → index):  {pipeline_s:7.2f} s  {pipe_rate:8.1f} docs/s")
    print(f"  the same, uploaded {args.batch} per kb_ingest_many:     {batched_s:7.2f} s  {batched_rate:8.1f} docs/s")
    print(f"  bulk load of the same {row_count} rows, one tx:      {bulk_s:7.2f} s  {bulk_rate:8.1f} docs/s")
    print(f"  bulk load of the same rows, one tx per document:   {per_doc_s:7.2f} s  {per_doc_rate:8.1f} docs/s")
    verdict = "met" if ratio >= 0.5 else "NOT met"
    print(f"  ratio pipeline / bulk (one tx)      = {ratio:.2f}x  (target >= 0.5x: {verdict})")
    print(f"  ratio pipeline / bulk (tx per doc)  = {ratio_doc:.2f}x")
    print(f"  batched uploads: / bulk (one tx) = {batched_rate / bulk_rate:.2f}x, "
          f"/ bulk (tx per doc) = {batched_rate / per_doc_rate:.2f}x")
    print("  CPU per document during the pipeline: " + ", ".join(f"{k} {v:.2f} ms" for k, v in cpu.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--db-url", default=None, help="tools DB (default: SQLite in a temp dir)")
    parser.add_argument("--replicas", type=int, default=1, help="tools-go processes")
    parser.add_argument("--max-ack-pending", type=int, default=64, help="jobs in flight, all replicas together")
    parser.add_argument("--concurrency", type=int, default=2, help="batches in flight per replica")
    parser.add_argument("--batch", type=int, default=50, help="documents per kb_ingest_many call (batched run)")
    asyncio.run(main(parser.parse_args()))
