"""The ingestion worker on the JetStream work queue: a SIGKILL mid-document is resumed after
redelivery with exactly a clean run's chunks; a corrupt PDF fails with its reason after the
bounded attempts; large documents travel through the object store; progress is streamed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from pathlib import Path

from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError

from services.tools_go_equiv.db.engine import Db
from services.tools_go_equiv.kb import store
from shared.bus.events import read_events
from shared.contract.ingest import IngestJob
from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, Process, Rows, Tools, connected, service_env


def big_document(paragraphs: int = 400) -> str:
    """Deterministic markdown with headings, named entities and ~180-character paragraphs."""
    teams = ["Orion", "Vega", "Helios", "Toggle", "Atlas"]
    parts = ["# Operations manual"]
    for i in range(paragraphs):
        if i % 25 == 0:
            parts.append(f"## Chapter {i // 25}")
        team = teams[i % len(teams)]
        parts.append(
            f"Procedure {i}: the {team} team checks queue {i * 7 % 97} every morning. "
            f"{team} uses NATS JetStream and PostgreSQL; escalate incident {1000 + i} to Carla Mendes if it fails."
        )
    return "\n\n".join(parts)


def chunk_rows(rows: Rows, doc_id: str) -> list[tuple[int, str, str]]:
    return [
        (r[0], r[1], r[2])
        for r in rows.all(
            "SELECT position, heading, text FROM kb_chunks WHERE document_id = :d ORDER BY position", d=doc_id
        )
    ]


async def test_sigkill_mid_document_resumes_with_no_duplicates(settings: Settings, tmp_path: Path) -> None:
    cfg = settings.model_copy(update={"ingest_ack_wait_s": 2.0, "ingest_max_deliver": 5})
    env = service_env(cfg, AGENTIX_KB_EMBED_BATCH="4", AGENTIX_KB_CHUNK_SIZE="200", AGENTIX_KB_CHUNK_OVERLAP="40")
    async with connected(cfg) as bus:  # declares the ingest consumer with the short lease
        parser = await InProcess(cfg, go=False).start()
        first = Process("services.tools_go_equiv", env, tmp_path / "go-1.log").start()
        second: Process | None = None
        rows = Rows(cfg.db_url("tools"))
        try:
            tools = Tools(bus)
            await tools.ready()
            await tools("kb_create", name="crash")
            await tools("kb_create", name="clean")
            text = big_document()
            job = await tools("kb_ingest", kb="crash", text=text, title="Manual")
            total = 0
            async for _, event in read_events(bus, job["job_id"], follow=True, idle_timeout_s=30):
                if event.type == "progress" and event.stage == "index" and event.done >= 24:
                    first.kill()  # SIGKILL: no drain, no nak, a transaction may be half written
                    total = event.total
                    break
            partial = rows.scalar("SELECT COUNT(*) FROM kb_chunks WHERE document_id = :d", d=job["document_id"])
            assert 24 <= partial < total, (partial, total)

            second = Process("services.tools_go_equiv", env, tmp_path / "go-2.log").start()
            done = await tools.wait_job(job["job_id"], timeout_s=60)
            assert done.status == "done" and done.chunks == total, (done, second.logs())
            state = await tools("kb_job_get", job_id=job["job_id"])
            assert state["status"] == "done" and state["attempts"] >= 2 and state["chunks"] == total

            clean = await tools("kb_ingest", kb="clean", text=text, title="Manual")
            assert (await tools.wait_job(clean["job_id"], timeout_s=60)).status == "done"

            crashed, reference = chunk_rows(rows, job["document_id"]), chunk_rows(rows, clean["document_id"])
            assert crashed == reference and len(crashed) == total
            assert [p for p, _, _ in crashed] == list(range(total))
            dup = rows.all(
                "SELECT document_id, position FROM kb_chunks GROUP BY document_id, position HAVING COUNT(*) > 1"
            )
            assert dup == []
            for doc in (job["document_id"], clean["document_id"]):
                ids = "SELECT id FROM kb_chunks WHERE document_id = :d"
                assert rows.scalar(f"SELECT COUNT(*) FROM kb_embeddings WHERE chunk_id IN ({ids})", d=doc) == total
                assert rows.scalar(f"SELECT COUNT(*) FROM kb_chunks_fts WHERE rowid IN ({ids})", d=doc) == total
            facts = "SELECT COUNT(*) FROM kb_facts WHERE document_id = :d"
            assert rows.scalar(facts, d=job["document_id"]) == rows.scalar(facts, d=clean["document_id"]) > 0
            # Both searchable and identical.
            a = await tools("kb_search", kb="crash", query="incident 1234 escalation", mode="fulltext")
            b = await tools("kb_search", kb="clean", query="incident 1234 escalation", mode="fulltext")
            assert [h["text"] for h in a["chunks"]] == [h["text"] for h in b["chunks"]] != []
        finally:
            rows.close()
            for proc in (first, second):
                if proc is not None and proc.proc is not None and proc.proc.poll() is None:
                    assert proc.terminate() == 0, proc.logs()
            await parser.stop()


async def test_corrupt_pdf_fails_with_its_reason_after_bounded_attempts(settings: Settings) -> None:
    cfg = settings.model_copy(update={"ingest_max_deliver": 2})
    async with connected(cfg) as bus:
        services = await InProcess(cfg).start()
        try:
            tools = Tools(bus)
            await tools.ready()
            await tools("kb_create", name="pdfs")
            broken = base64.b64encode(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage without xref\n").decode()
            job = await tools("kb_ingest", kb="pdfs", content_b64=broken, filename="broken.pdf")
            events = []
            async for _, event in read_events(bus, job["job_id"], follow=True, idle_timeout_s=30):
                events.append(event)
            done = events[-1]
            assert done.type == "done" and done.status == "failed"
            assert "after 2 attempts" in done.error and "PDF" in done.error
            assert [e.status for e in events if e.type == "status"] == ["running", "retrying", "running"]
            state = await tools("kb_job_get", job_id=job["job_id"])
            assert state["status"] == "failed" and state["attempts"] == 2 and "PDF" in state["error"]
            doc = await tools("doc_get", kb="pdfs", doc_id=job["document_id"])
            assert doc["status"] == "failed" and "PDF" in doc["error"]
            # A failed document does not block a new attempt with the same content.
            again = await tools("kb_ingest", kb="pdfs", content_b64=broken, filename="broken.pdf")
            assert again["duplicate"] is False and again["job_id"] != job["job_id"]
            assert (await tools.wait_job(again["job_id"])).status == "failed"
            # The work queue holds nothing more for it (terminated right after the `done` event).
            for _ in range(50):
                if (await bus.js.stream_info(bus.names.ingest_stream)).state.messages == 0:
                    break
                await asyncio.sleep(0.05)
            assert (await bus.js.stream_info(bus.names.ingest_stream)).state.messages == 0
        finally:
            await services.stop()


async def test_large_documents_go_through_the_object_store(settings: Settings) -> None:
    async with connected(settings) as bus:
        services = await InProcess(settings).start()
        try:
            tools = Tools(bus)
            await tools.ready()
            await tools("kb_create", name="big")
            text = big_document(1800)
            assert len(text.encode()) > 256 * 1024
            job = await tools("kb_ingest", kb="big", text=text)
            progress = []
            async for _, event in read_events(bus, job["job_id"], follow=True, idle_timeout_s=60):
                if event.type == "progress":
                    progress.append((event.stage, event.done, event.total))
                last = event
            assert last.type == "done" and last.status == "done" and last.chunks > 100
            index = [p for p in progress if p[0] == "index"]
            assert index[-1][1] == index[-1][2] == last.chunks
            assert [d for _, d, _ in index] == sorted(d for _, d, _ in index)
            doc = await tools("doc_get", kb="big", doc_id=job["document_id"])
            assert doc["title"] == "Operations manual" and doc["size"] == len(text.encode())
            # The upload (and the parsed copy) are removed once the document is indexed.
            store = await bus.object_store(bus.names.uploads_bucket)
            try:
                leftovers = [o.name for o in await store.list(ignore_deletes=True)]
            except NotFoundError:
                leftovers = []
            assert leftovers == []
        finally:
            await services.stop()


async def test_a_job_exhausted_while_no_worker_lives_is_failed_by_the_next_one(settings: Settings) -> None:
    """Its workers died on every delivery, and none was alive to hear the MAX_DELIVERIES
    advisory: the dead-letter stream keeps it, and the next worker to start records the failure."""
    cfg = settings.model_copy(update={"ingest_ack_wait_s": 1.0, "ingest_max_deliver": 2})
    async with connected(cfg) as bus:
        services = await InProcess(cfg).start()
        tools = Tools(bus)
        await tools.ready()
        kb = await tools("kb_create", name="orphans")
        await services.stop()  # from here on no worker lives

        db = Db(cfg.db_url("tools"))
        with db.tx() as conn:
            reg = store.register_document(conn, kb["id"], "alice", "Lost", "lost.md", "text/markdown", "h1", 5)
        db.close()
        job = IngestJob(job_id=reg.job_id, kb=kb["id"], document_id=reg.document_id, user_id="alice",
                        title="Lost", text="hello", content_hash="h1")  # fmt: skip
        await bus.js_publish(bus.subjects.ingest_jobs, job, msg_id=job.msg_id)
        # A "worker" that takes the job and dies each time: both deliveries expire unanswered.
        doomed = await bus.js.pull_subscribe_bind(durable=bus.names.ingest_consumer, stream=bus.names.ingest_stream)
        for _ in range(2):
            [msg] = await doomed.fetch(1, timeout=10)
            assert msg.metadata.num_delivered == _ + 1
        # The server announces the exhaustion when it next looks for work to hand out, here to a
        # worker that asks and then dies too: nobody hears the advisory.
        with contextlib.suppress(NatsTimeout, TimeoutError):
            await doomed.fetch(1, timeout=2)
        await doomed.unsubscribe()
        dead = bus.names.dead_stream
        for _ in range(200):
            if (await bus.js.stream_info(dead)).state.messages:
                break
            await asyncio.sleep(0.05)
        assert (await bus.js.stream_info(dead)).state.messages == 1

        services = await InProcess(cfg).start()
        try:
            done = await tools.wait_job(job.job_id)
            assert done.status == "failed" and "redelivery exhausted" in (done.error or "")
            state = await tools("kb_job_get", job_id=job.job_id)
            assert state["status"] == "failed" and "redelivery exhausted" in state["error"]
            for _ in range(100):
                left = (await bus.js.stream_info(bus.names.ingest_stream)).state.messages
                if not left and not (await bus.js.stream_info(dead)).state.messages:
                    break
                await asyncio.sleep(0.05)
            assert (await bus.js.stream_info(bus.names.ingest_stream)).state.messages == 0
            assert (await bus.js.stream_info(dead)).state.messages == 0
        finally:
            await services.stop()
