"""Ingestion job rows: what `kb_job_get` reports and what survives a worker crash."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from services.tools_go_equiv.db.schema import jobs
from services.tools_go_equiv.db.sql import Sql
from services.tools_go_equiv.ids import now
from services.tools_go_equiv.kb import store
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
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


_JOB_COLUMNS = frozenset({"status", "stage", "done", "total", "attempts", "chunks", "error"})


def set_job(conn: Connection, job_id: str, **values: Any) -> None:
    unknown = set(values) - _JOB_COLUMNS
    if unknown:
        raise ValueError(f"not job columns: {unknown}")
    sql = Sql(conn)
    assignments = ", ".join(f"{k} = :{k}" for k in sorted(values))
    sql.execute(
        f"UPDATE kb_ingest_jobs SET {assignments}, updated_at = :updated_at WHERE id = :id",
        {**values, "updated_at": sql.ts(now()), "id": job_id},
    )


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
