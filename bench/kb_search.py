"""Search latency at 50,000 chunks: p50 of `kb_search` in hybrid mode (vector + full-text +
entity graph, fused) against the full-text-only query on the same data, same run, through the
tool over NATS (tools-go as its own process). Target: hybrid ≤ 3× full-text. Absolute figures
are printed too.

The data is built directly with the service's own functions (chunking, local embedder, fact
extraction, idempotent batch insert) — the ingest pipeline itself is measured by bench/ingest.py.
Run:  python -m bench.kb_search [--chunks 50000] [--queries 200] [--db-url postgresql://…]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.ingest import call, wait_tools
from services.tools_go_equiv.db import Db, create_schema
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.kb.chunk import chunk_sections
from services.tools_go_equiv.kb.embed import LocalEmbedder
from services.tools_go_equiv.kb.facts import extract_facts
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.natsd import NatsServer
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
USER = "bench"


SYLLABLES = "ka lo mi ne su ta ri po ve da zu fe gi ho ja ku ly mo ny pe qa ro si tu wa xe yo".split()
VOCAB = sorted({"".join(random.Random(n).choices(SYLLABLES, k=2 + n % 3)) for n in range(6000)})
ENTITIES = sorted({"".join(random.Random(-n).choices(SYLLABLES, k=3)).title() for n in range(1500)})
# Zipf-like frequencies, as in real text: a few words are everywhere, most are rare.
VOCAB_WEIGHTS = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCAB))))
ENTITY_WEIGHTS = list(itertools.accumulate(1 / (rank + 1) ** 0.8 for rank in range(len(ENTITIES))))


def document(i: int) -> str:
    """A deterministic ~2 KB Markdown document over a Zipf vocabulary with named entities."""
    rnd = random.Random(i)
    parts = [f"# {' '.join(rnd.choices(VOCAB, cum_weights=VOCAB_WEIGHTS, k=3)).title()} {i}"]
    while sum(len(p) for p in parts) < 1950:
        if rnd.random() < 0.15:
            parts.append(f"## {' '.join(rnd.choices(VOCAB, cum_weights=VOCAB_WEIGHTS, k=2)).title()}")
        a, b = rnd.choices(ENTITIES, cum_weights=ENTITY_WEIGHTS, k=2)
        words = " ".join(rnd.choices(VOCAB, cum_weights=VOCAB_WEIGHTS, k=rnd.randint(15, 28)))
        kind = " ".join(rnd.choices(VOCAB, cum_weights=VOCAB_WEIGHTS, k=2))
        parts.append(f"{a} uses {b} for the {words}. {a} is a {kind}.")
    return "\n\n".join(parts)[:2048]


def sections_of(text: str) -> list[dict[str, Any]]:
    """Markdown headings → sections (what doc_parse returns), without a service round trip."""
    out: list[dict[str, Any]] = []
    heading, level, body = "", 0, []
    for line in text.split("\n"):
        if line.startswith("#"):
            out.append({"heading": heading, "level": level, "text": "\n".join(body)})
            level = len(line) - len(line.lstrip("#"))
            heading, body = line.lstrip("#").strip(), []
        else:
            body.append(line)
    out.append({"heading": heading, "level": level, "text": "\n".join(body)})
    return [s for s in out if s["text"].strip()]


def build(db: Db, target_chunks: int, group: int = 250) -> str:
    """A KB of `target_chunks` chunks, written `group` documents per transaction; returns its id."""
    embedder = LocalEmbedder(384)
    with db.tx() as conn:
        kb = store.create_kb(conn, USER, "big", "benchmark data", embedder.name, embedder.dim)
    made, i = 0, 0
    started = time.perf_counter()
    while made < target_chunks:
        batch = []
        for _ in range(group):
            if made >= target_chunks:
                break
            text = document(i)
            title = text.split("\n", 1)[0].lstrip("# ")
            pieces = chunk_sections(sections_of(text), 800, 120)[: target_chunks - made]
            batch.append((i, text, title, pieces))
            made += len(pieces)
            i += 1
        vectors = embedder.embed_sync([c.index_text for _, _, _, pieces in batch for c in pieces])
        with db.tx() as conn:
            row = 0
            for n, text, title, pieces in batch:
                reg = store.register_document(
                    conn, kb.id, USER, title, f"doc-{n}.md", "text/markdown", f"{n:064x}", len(text)
                )
                found = [extract_facts(c.text, title) for c in pieces]
                store.insert_batch(conn, kb.id, reg.document_id, pieces, vectors[row : row + len(pieces)], found)
                jobs.finish(conn, reg.job_id, reg.document_id, kb.id, None)
                row += len(pieces)
        print(f"  built {made} chunks ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return kb.id


def queries(n: int) -> list[str]:
    """Questions mixing frequent and rare words, most naming an entity."""
    rnd = random.Random(7)
    out = []
    for _ in range(n):
        words = rnd.choices(VOCAB, cum_weights=VOCAB_WEIGHTS, k=rnd.randint(2, 4))
        if rnd.random() < 0.6:
            words.insert(rnd.randrange(len(words) + 1), rnd.choices(ENTITIES, cum_weights=ENTITY_WEIGHTS)[0])
        out.append("what about " + " ".join(words))
    return out


async def p50_ms(client: ToolClient, kb: str, mode: str, qs: list[str]) -> tuple[float, float, int]:
    samples, hits = [], 0
    for q in qs:
        t = time.perf_counter()
        out = await call(client, "kb_search", kb=kb, query=q, mode=mode, top_k=5)
        samples.append((time.perf_counter() - t) * 1000)
        hits += len(out["chunks"])
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1], hits


def start_services(env: dict[str, str], log_path: Path) -> list[subprocess.Popen[bytes]]:
    with log_path.open("ab") as log:
        return [
            subprocess.Popen([sys.executable, "-m", m], env=env, stdout=log, stderr=log, cwd=ROOT)
            for m in ("services.tools_go_equiv", "services.tools_py")
        ]


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="agentix-bench-search-"))
    settings = Settings(data_dir=work / "data", subject_prefix="benchsearch", tools_db_url=args.db_url)
    db = Db(settings.db_url("tools"))
    create_schema(db)
    t = time.perf_counter()
    kb_id = await asyncio.to_thread(build, db, args.chunks)
    if not db.is_sqlite:  # a production database has planner statistics; give this fresh one its own
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
    with db.read_tx() as conn:
        rows = {
            name: conn.exec_driver_sql(f"SELECT COUNT(*) FROM {name} WHERE kb_id = '{kb_id}'").scalar()
            for name in ("kb_chunks", "kb_embeddings", "kb_facts")
        }
    db.close()
    print(f"  data: {rows} built in {time.perf_counter() - t:.0f} s", file=sys.stderr)

    nats = NatsServer(work / "nats").start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")} | {
        "AGENTIX_NATS_SERVERS": nats.url,
        "AGENTIX_SUBJECT_PREFIX": settings.subject_prefix,
        "AGENTIX_DATA_DIR": str(settings.data_dir),
        "AGENTIX_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    if args.db_url:
        env["AGENTIX_TOOLS_DB_URL"] = args.db_url
    procs = start_services(env, work / "tools.log")
    bus = await Bus.connect(settings.model_copy(update={"nats_servers": [nats.url]}), name="bench")
    try:
        client = ToolClient(bus)
        await wait_tools(client)
        qs = queries(args.queries)
        await p50_ms(client, kb_id, "hybrid", qs[:20])  # warm: loads the vector matrix, warms caches
        await p50_ms(client, kb_id, "fulltext", qs[:20])
        results = {}
        for mode in ("fulltext", "hybrid", "vector", "graph"):
            results[mode] = await p50_ms(client, kb_id, mode, qs)
    finally:
        await bus.close()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        nats.cleanup()
    db_name = "postgresql" if args.db_url else "sqlite"
    print(f"kb_search benchmark: {rows['kb_chunks']} chunks, {rows['kb_facts']} facts, {db_name}, "
          f"{args.queries} queries via NATS")  # fmt: skip
    for mode, (p50, p95, hits) in results.items():
        print(f"  {mode:9s} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms   ({hits / len(qs):.1f} hits/query)")
    ratio = results["hybrid"][0] / results["fulltext"][0]
    print(f"  ratio hybrid / fulltext p50 = {ratio:.2f}x  (target <= 3x: {'met' if ratio <= 3 else 'NOT met'})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--db-url", default=None, help="tools DB (default: SQLite in a temp dir); must be empty")
    asyncio.run(main(parser.parse_args()))
