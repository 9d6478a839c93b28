"""The ingestion worker's batches: jobs that queued up are fetched together (never more than
max_ack_pending), parsed in one doc_parse_many request and committed in one transaction — with
exactly the rows a one-at-a-time ingestion writes, stage events only, one bad document failing
alone, and no duplicates after a SIGKILL mid-batch."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.msg import Msg

from services.tools_go_equiv.db import Db, create_schema
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.kb.chunk import Chunk
from services.tools_go_equiv.kb.embed import LocalEmbedder
from services.tools_go_equiv.kb.facts import extract_facts
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events
from shared.contract.events import ProgressEvent
from shared.contract.ingest import IngestJob
from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, Process, Rows, Tools, connected, service_env

TEAMS = ["Orion", "Vega", "Helios", "Atlas", "Carla Mendes", "Northwind Labs"]


def small_doc(i: int) -> str:
    """~1.5 KB of markdown: a heading, two sections, named entities."""
    a, b = TEAMS[i % len(TEAMS)], TEAMS[(i + 2) % len(TEAMS)]
    body = " ".join(f"{a} uses {b} for queue {i}-{k} and checks the dashboard every morning." for k in range(8))
    return f"# Runbook {i}\n\n{body}\n\n## Escalation\n\n{b} is a team. Escalate incident {1000 + i} to {a}."


@pytest.fixture
async def db(backend: Settings) -> AsyncIterator[Db]:
    database = Db(backend.db_url("tools"))
    await asyncio.to_thread(create_schema, database)
    yield database
    database.close()


async def queue_jobs(bus: Bus, db: Db, user: str, kb_name: str, texts: list[str]) -> tuple[str, list[IngestJob]]:
    """What kb_ingest does (document and job rows, the `queued` event, the job on the work queue),
    done before any worker runs, so the jobs are waiting together when it starts."""
    emb = LocalEmbedder()
    kb = await db.run(store.create_kb, user, kb_name, "", emb.name, emb.dim)
    queued: list[IngestJob] = []
    for i, text in enumerate(texts):
        digest = hashlib.sha256(text.encode()).hexdigest()
        reg = await db.run(store.register_document, kb.id, user, "", f"d{i}.md", "text/markdown", digest, len(text))
        job = IngestJob(job_id=reg.job_id, kb=kb.id, document_id=reg.document_id, user_id=user, title="",
                        filename=f"d{i}.md", media_type="text/markdown", text=text, content_hash=digest)  # fmt: skip
        events = EventPublisher(bus, job.job_id)
        await events.emit(ProgressEvent(task_id=job.job_id, stage="queued", done=0, total=0))
        await events.flush()
        await bus.js_publish(bus.subjects.ingest_jobs, job, msg_id=job.msg_id)
        queued.append(job)
    return kb.id, queued


async def start_services(bus: Bus, cfg: Settings) -> tuple[Tools, list[InProcess]]:
    """tools_py first, so the worker's first batch finds doc_parse_many answering."""
    parser = await InProcess(cfg, go=False).start()
    tools = Tools(bus)
    await tools.ready(services=("py",))
    worker = await InProcess(cfg, py=False).start()
    await tools.ready()
    return tools, [worker, parser]


async def stop_services(services: list[InProcess]) -> None:
    for s in services:
        await s.stop()


def rows_of(rows: Rows, doc_id: str) -> list[tuple[Any, ...]]:
    """A document's chunks with their vector and facts, in position order (ids left out)."""
    chunks = rows.all(
        "SELECT c.position, c.heading, c.text, e.vector FROM kb_chunks c JOIN kb_embeddings e ON e.chunk_id = c.id "
        "WHERE c.document_id = :d ORDER BY c.position",
        d=doc_id,
    )
    facts = rows.all(
        "SELECT c.position, f.subject, f.relation, f.object FROM kb_facts f JOIN kb_chunks c ON c.id = f.chunk_id "
        "WHERE f.document_id = :d ORDER BY c.position, f.subject, f.relation, f.object",
        d=doc_id,
    )
    return [(p, h, t, bytes(v)) for p, h, t, v in chunks] + [tuple(f) for f in facts]


async def test_queued_small_documents_are_indexed_in_batches_like_one_at_a_time(backend: Settings, db: Db) -> None:
    cfg = backend.model_copy(update={"ingest_max_ack_pending": 8})
    user = f"u-{uuid.uuid4().hex[:8]}"
    texts = [small_doc(i) for i in range(24)]
    async with connected(cfg) as bus:
        kb_id, queued = await queue_jobs(bus, db, user, "batched", texts)
        tools, services = await start_services(bus, cfg)
        rows = Rows(cfg.db_url("tools"))
        try:
            for job in queued:
                done = await tools.wait_job(job.job_id)
                assert done.status == "done" and done.chunks and done.chunks > 0, done
            # Stage events only: queued, running, done.
            events = [e async for _, e in read_events(bus, queued[5].job_id, follow=False)]
            assert [(e.type, getattr(e, "status", None)) for e in events] == [
                ("progress", None), ("status", "running"), ("done", "done")
            ]  # fmt: skip
            assert [e.n for e in events] == [1, 2, 3]
            # Every batch is one commit (one revision); max_ack_pending 8 → batches of at most 4.
            revision = rows.scalar("SELECT revision FROM kb_bases WHERE id = :kb", kb=kb_id)
            assert 6 <= revision <= 12, revision
            state = await tools("kb_job_get", user, job_id=queued[0].job_id)
            assert state["status"] == "done" and state["attempts"] == 1 and state["chunks"] == state["total"] > 0

            # The same documents one at a time through kb_ingest: the very same rows.
            await tools("kb_create", user, name="single")
            for text, job in zip(texts, queued, strict=True):
                one = await tools("kb_ingest", user, kb="single", text=text, filename="x.md")
                assert (await tools.wait_job(one["job_id"])).status == "done"
                assert rows_of(rows, one["document_id"]) == rows_of(rows, job.document_id) != []
            ready = "SELECT COUNT(*) FROM kb_documents WHERE kb_id = :kb AND status = 'ready'"
            assert rows.scalar(ready, kb=kb_id) == 24
            hits = await tools("kb_search", user, kb="batched", query="incident 1007 escalation", mode="hybrid")
            assert hits["chunks"] and "1007" in hits["chunks"][0]["text"]
        finally:
            rows.close()
            await stop_services(services)


async def test_a_bad_document_fails_alone_and_its_batch_is_indexed(backend: Settings, db: Db) -> None:
    cfg = backend.model_copy(update={"ingest_max_deliver": 2})
    user = f"u-{uuid.uuid4().hex[:8]}"
    async with connected(cfg) as bus:
        kb_id, good = await queue_jobs(bus, db, user, "mixed", [small_doc(i) for i in range(4)])
        # An empty document, one deleted before it was indexed, and a corrupt PDF in the store.
        _, (empty, gone) = await queue_jobs(bus, db, user, "other", ["   \n\n   ", small_doc(99)])
        await db.run(store.delete_document, gone.kb, gone.document_id)
        pdf = b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage without xref\n"
        await (await bus.object_store(bus.names.uploads_bucket)).put("uploads/broken", pdf)
        reg = await db.run(store.register_document, kb_id, user, "", "broken.pdf", None, "ab" * 32, len(pdf))
        broken = IngestJob(job_id=reg.job_id, kb=kb_id, document_id=reg.document_id, user_id=user, title="",
                           filename="broken.pdf", content_ref="uploads/broken", content_hash="ab" * 32)  # fmt: skip
        await bus.js_publish(bus.subjects.ingest_jobs, broken)
        tools, services = await start_services(bus, cfg)
        try:
            for job in good:
                assert (await tools.wait_job(job.job_id)).status == "done"
            failed = {name: await tools.wait_job(job.job_id) for name, job in
                      (("empty", empty), ("gone", gone), ("pdf", broken))}  # fmt: skip
            assert all(d.status == "failed" for d in failed.values()), failed
            assert "after 2 attempts" in (failed["empty"].error or "") and "no text" in (failed["empty"].error or "")
            assert "deleted" in (failed["gone"].error or "")
            assert "after 2 attempts" in (failed["pdf"].error or "") and "PDF" in (failed["pdf"].error or "")
            state = await tools("kb_job_get", user, job_id=broken.job_id)
            assert state["status"] == "failed" and state["attempts"] == 2
            listing = await tools("doc_list", user, kb="mixed")
            assert sorted(d["status"] for d in listing["items"]) == ["failed"] + ["ready"] * 4
        finally:
            await stop_services(services)


async def test_sigkill_mid_batch_then_redelivery_leaves_exactly_a_clean_runs_rows(
    settings: Settings, tmp_path: Path
) -> None:
    cfg = settings.model_copy(update={"ingest_ack_wait_s": 2.0, "ingest_max_deliver": 5, "ingest_max_ack_pending": 16})
    texts = [small_doc(i) for i in range(150)]
    env = service_env(cfg, AGENTIX_INGEST_MAX_ACK_PENDING="16")
    db = Db(cfg.db_url("tools"))
    await asyncio.to_thread(create_schema, db)
    async with connected(cfg) as bus:
        _, queued = await queue_jobs(bus, db, "alice", "crash", texts)
        finished: set[str] = set()

        async def on_status(msg: Msg) -> None:
            event = json.loads(msg.data)
            if event.get("type") == "done":
                finished.add(event["task_id"])

        sub = await bus.nc.subscribe(f"{cfg.subject_prefix}.events.*.status", cb=on_status)
        parser = await InProcess(cfg, go=False).start()
        await Tools(bus).ready(services=("py",))
        first = Process("services.tools_go_equiv", env, tmp_path / "go-1.log").start()
        second: Process | None = None
        rows = Rows(cfg.db_url("tools"))
        try:
            for _ in range(600):
                if len(finished) >= 10:
                    break
                await asyncio.sleep(0.05)
            first.kill()  # SIGKILL: no nak, maybe in the middle of a batch's transaction
            assert 10 <= len(finished) < len(texts), (len(finished), first.logs())
            second = Process("services.tools_go_equiv", env, tmp_path / "go-2.log").start()
            tools = Tools(bus)
            for job in queued:
                assert (await tools.wait_job(job.job_id, timeout_s=90)).status == "done", second.logs()
            twice = "SELECT document_id, position FROM kb_chunks GROUP BY document_id, position HAVING COUNT(*) > 1"
            assert rows.all(twice) == []
            _, clean = await queue_jobs(bus, db, "alice", "clean", texts)
            for job in clean:
                assert (await tools.wait_job(job.job_id, timeout_s=90)).status == "done"
            for crashed, reference in zip(queued, clean, strict=True):
                assert rows_of(rows, crashed.document_id) == rows_of(rows, reference.document_id) != []
            chunk_ids = "SELECT id FROM kb_chunks"
            total = rows.scalar("SELECT COUNT(*) FROM kb_chunks")
            assert rows.scalar(f"SELECT COUNT(*) FROM kb_chunks_fts WHERE rowid IN ({chunk_ids})") == total
            assert rows.scalar("SELECT COUNT(*) FROM kb_chunks_fts") == total
        finally:
            await sub.unsubscribe()
            rows.close()
            db.close()
            for proc in (first, second):
                if proc is not None and proc.proc is not None and proc.proc.poll() is None:
                    assert proc.terminate() == 0, proc.logs()
            await parser.stop()


async def test_finish_all_writes_once_and_skips_deleted_documents(backend: Settings, db: Db) -> None:
    """The batch commit on its own: rows an earlier attempt wrote are not written twice, a
    document deleted meanwhile is reported and skipped, the KB revision moves once."""
    user = f"u-{uuid.uuid4().hex[:8]}"
    emb = LocalEmbedder(32)
    kb = await db.run(store.create_kb, user, "commit", "", emb.name, emb.dim)
    regs = [await db.run(store.register_document, kb.id, user, "", None, None, f"{i}" * 64, 10) for i in range(3)]
    texts = {0: ["Orion uses NATS.", "Vega is a team.", "Helios runs firmware."], 1: ["Atlas uses Vega."], 2: ["x y"]}

    def analysed(i: int, positions: list[int]) -> store.Analysed:
        chunks = [Chunk(p, "Head", texts[i][p]) for p in positions]
        return store.Analysed(kb.id, regs[i].document_id, chunks, emb.embed_sync([c.index_text for c in chunks]),
                              [extract_facts(c.text, "Doc") for c in chunks])  # fmt: skip

    def earlier_attempt(conn: Any) -> None:
        store.insert_chunks(conn, [analysed(0, [0])])

    await db.run(earlier_attempt)
    await db.run(store.delete_document, kb.id, regs[2].document_id)
    before = kb.revision
    items = [jobs.Finish(regs[i].job_id, 2, f"T{i}", analysed(i, list(range(len(texts[i]))))) for i in range(3)]
    out = await db.run(jobs.finish_all, items)
    assert isinstance(out[regs[2].job_id], store.DocumentGone)
    (n0, rev0), (n1, rev1) = out[regs[0].job_id], out[regs[1].job_id]  # type: ignore[misc]
    assert (n0, n1) == (3, 1) and rev0 == rev1 == before + 1
    rows = Rows(db.url)
    try:
        assert rows.scalar("SELECT COUNT(*) FROM kb_chunks WHERE document_id = :d", d=regs[0].document_id) == 3
        assert rows.scalar("SELECT COUNT(*) FROM kb_embeddings WHERE kb_id = :kb", kb=kb.id) == 4
        vec = rows.scalar("SELECT e.vector FROM kb_embeddings e JOIN kb_chunks c ON c.id = e.chunk_id "
                          "WHERE c.document_id = :d AND c.position = 2", d=regs[0].document_id)  # fmt: skip
        assert bytes(vec) == emb.embed_sync(["Head\nHelios runs firmware."]).astype("<f4").tobytes()
        facts = rows.all("SELECT subject, relation, object FROM kb_facts WHERE document_id = :d", d=regs[1].document_id)
        assert [tuple(f) for f in facts] == [("Atlas", "uses", "Vega")]
        if db.is_sqlite:
            assert rows.scalar("SELECT COUNT(*) FROM kb_chunks_fts") == 4
        doc = rows.all("SELECT status, chunks, title FROM kb_documents WHERE id = :d", d=regs[0].document_id)
        assert [tuple(d) for d in doc] == [("ready", 3, "T0")]
        job = rows.all("SELECT status, done, total, attempts FROM kb_ingest_jobs WHERE id = :j", j=regs[1].job_id)
        assert [tuple(j) for j in job] == [("done", 1, 1, 2)]
    finally:
        rows.close()


async def test_doc_parse_many_answers_each_document_and_overflows_to_the_store(settings: Settings) -> None:
    async with connected(settings) as bus:
        services = await InProcess(settings, go=False).start()
        try:
            tools = Tools(bus)
            await tools.ready(services=("py",))
            docs = [
                {"text": "# One\n\nFirst.", "filename": "a.md"},
                {"text": "x", "filename": "a.exe"},
                {"object_name": "uploads/missing"},
                {"text": "<h1>Two</h1><p>Second.</p>", "filename": "b.html"},
            ]
            out = await tools("doc_parse_many", documents=docs)
            ok = [r["ok"] for r in out["results"]]
            assert ok == [True, False, False, True]
            assert out["results"][0]["result"]["title"] == "One" and out["results"][3]["result"]["title"] == "Two"
            assert "unsupported" in out["results"][1]["error"]["message"]
            assert out["results"][2]["error"]["code"] == "not_found"
            # Too large for one NATS message: the answer is left in the uploads store.
            big = [{"text": f"# Doc {i}\n\n" + "word " * 40_000, "filename": f"{i}.md"} for i in range(2)]
            ref = (await tools("doc_parse_many", documents=big))["result_ref"]
            stored = await (await bus.object_store(bus.names.uploads_bucket)).get(ref)
            assert [r["result"]["title"] for r in json.loads(stored.data or b"{}")["results"]] == ["Doc 0", "Doc 1"]
        finally:
            await services.stop()
