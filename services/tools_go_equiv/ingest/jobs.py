"""Ingestion job rows: what `kb_job_get` reports and what survives a worker crash."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from services.tools_go_equiv.db.schema import jobs
from services.tools_go_equiv.db.sql import Sql, update_row
from services.tools_go_equiv.ids import aware, now
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.kb.store import DocumentGone
from shared.contract.ingest import IngestJobState


def get_job(conn: Connection, job_id: str) -> Any:
    return conn.execute(select(jobs).where(jobs.c.id == job_id)).first()


def job_state(row: Any) -> IngestJobState:
    return IngestJobState(
        job_id=row.id,
        kb=row.kb_id,
        document_id=row.document_id,
        status=row.status,
        stage=row.stage,
        done=row.done,
        total=row.total,
        attempts=row.attempts,
        chunks=row.chunks,
        error=row.error,
        created_at=aware(row.created_at),  # a zone even where SQLite hands back naive UTC
        updated_at=aware(row.updated_at),
    )


_JOB_COLUMNS = frozenset({"status", "stage", "done", "total", "attempts", "chunks", "error"})


def set_job(conn: Connection, job_id: str, **values: Any) -> None:
    update_row(conn, "kb_ingest_jobs", _JOB_COLUMNS, job_id, values)


def start_attempt(conn: Connection, job_id: str, doc_id: str, kb_id: str, attempt: int) -> None:
    store.lock_document(conn, doc_id, kb_id)
    set_job(conn, job_id, status="running", stage="index", attempts=attempt)
    store.set_document(conn, doc_id, status="ingesting", error=None)


def finish(conn: Connection, job_id: str, doc_id: str, kb_id: str, title: str | None) -> tuple[int, int]:
    """Make the document searchable: all its rows appear to search at once. → (chunks, revision)"""
    store.lock_document(conn, doc_id, kb_id)
    count = store.count_chunks(conn, doc_id)
    values: dict[str, Any] = {"status": "ready", "chunks": count, "error": None}
    if title:
        values["title"] = title
    store.set_document(conn, doc_id, **values)
    set_job(conn, job_id, status="done", stage="done", done=count, total=count, chunks=count, error=None)
    return count, store.bump_revision(conn, kb_id)


def fail(conn: Connection, job_id: str, doc_id: str, reason: str, attempts: int | None = None) -> None:
    extra = {"attempts": attempts} if attempts else {}
    set_job(conn, job_id, status="failed", stage="failed", error=reason, **extra)
    store.set_document(conn, doc_id, status="failed", error=reason)


def note_retry(conn: Connection, job_id: str, attempt: int, reason: str) -> None:
    set_job(conn, job_id, status="queued", stage="retry", attempts=attempt, error=reason)


@dataclass(frozen=True)
class Finish:
    """A job whose document's remaining rows are ready to be written."""

    job_id: str
    attempt: int
    title: str | None  # the parsed title, when the job brought none
    rows: store.Analysed


def finish_all(conn: Connection, items: Sequence[Finish]) -> dict[str, tuple[int, int] | DocumentGone]:
    """Write each document's rows and make it searchable, all in the caller's one transaction:
    a batch of small documents costs a handful of statements, not a handful per document.
    → job → (chunks, KB revision), or DocumentGone for a document deleted meanwhile."""
    docs = [i.rows for i in items]
    present = store.lock_documents(conn, [d.kb_id for d in docs], [d.document_id for d in docs])
    out: dict[str, tuple[int, int] | DocumentGone] = {
        i.job_id: DocumentGone(i.rows.document_id) for i in items if i.rows.document_id not in present
    }
    live = [i for i in items if i.rows.document_id in present]
    if not live:
        return out
    store.insert_chunks(conn, [i.rows for i in live])
    counts = store.chunk_counts(conn, [i.rows.document_id for i in live])
    store.set_ready(conn, [(i.rows.document_id, counts[i.rows.document_id], i.title) for i in live])
    mark_done(conn, [(i.job_id, counts[i.rows.document_id], i.attempt) for i in live])
    # KBs in id order: two batches bumping the same KBs queue instead of deadlocking.
    revisions = {kb: store.bump_revision(conn, kb) for kb in sorted({i.rows.kb_id for i in live})}
    out |= {i.job_id: (counts[i.rows.document_id], revisions[i.rows.kb_id]) for i in live}
    return out


def mark_done(conn: Connection, done: Sequence[tuple[str, int, int]]) -> None:
    """(job, chunks, attempt) → done."""
    sql = Sql(conn)
    ts = sql.ts(now())
    sql.executemany(
        "UPDATE kb_ingest_jobs SET status = 'done', stage = 'done', done = :n, total = :n, chunks = :n, "
        "attempts = :attempt, error = NULL, updated_at = :ts WHERE id = :id",
        ({"id": job, "n": n, "attempt": attempt, "ts": ts} for job, n, attempt in done),
    )


@dataclass
class JobView:
    """What a worker needs to know about a job before it starts."""

    status: str
    chunks: int
    embedder: str | None  # None: the KB is gone
    have: set[int] = field(default_factory=set)  # chunk positions written by earlier attempts


def load_views(conn: Connection, wanted: Sequence[tuple[str, str, str]]) -> dict[str, JobView]:
    """(job, kb, document) → the job's view, for the jobs whose row still exists."""
    sql = Sql(conn)
    jobs_in, params = sql.in_list("j", [j for j, _, _ in wanted])
    found = sql.execute(f"SELECT id, status, chunks FROM kb_ingest_jobs WHERE id IN {jobs_in}", params)
    rows = {r[0]: r for r in found.fetchall()}
    kbs_in, params = sql.in_list("k", sorted({k for _, k, _ in wanted}))
    embedders = dict(sql.execute(f"SELECT id, embedder FROM kb_bases WHERE id IN {kbs_in}", params).fetchall())
    pending = [d for j, _, d in wanted if j in rows and rows[j][1] != "done"]
    have = store.positions_of(conn, pending) if pending else {}
    return {
        job: JobView(str(rows[job][1]), int(rows[job][2]), embedders.get(kb), have.get(doc, set()))
        for job, kb, doc in wanted
        if job in rows
    }
