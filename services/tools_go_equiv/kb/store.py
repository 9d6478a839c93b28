"""Knowledge bases, documents and their indexed rows: synchronous functions over one
connection, run in a worker thread inside a transaction by `Db.run`/`Db.read`.

Deletes cascade explicitly (full-text rows, facts, embeddings, chunks, documents, jobs) in the
caller's single transaction, after locking the rows being deleted, so a concurrent ingestion
batch either finishes first or finds its document gone."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection, delete, func, insert, select, text
from sqlalchemy.exc import IntegrityError

from services.tools_go_equiv.db.schema import chunks, documents, embeddings, facts, jobs, kbs
from services.tools_go_equiv.db.sql import Sql, update_row
from services.tools_go_equiv.ids import iso, new_id, now
from services.tools_go_equiv.kb.chunk import Chunk
from services.tools_go_equiv.kb.facts import Fact
from shared.errors import AgentixError

if TYPE_CHECKING:
    import numpy as np

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,99}$")
READY = "ready"


class DocumentGone(AgentixError):
    """The document was deleted while it was being ingested (the message is its id)."""

    code = "not_found"
    http_status = 404
    retryable = False  # no attempt brings it back: the job ends now


@dataclass(frozen=True)
class Registered:
    document_id: str
    job_id: str
    duplicate: bool
    status: str


def _sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"


def kb_public(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "description": row.description,
        "embedder": row.embedder,
        "revision": row.revision,
        "created_at": iso(row.created_at),
    }


# ---- knowledge bases


def create_kb(conn: Connection, user_id: str, name: str, description: str, embedder: str, dim: int) -> Any:
    ts = now()
    kb_id = new_id("kb")
    try:
        with conn.begin_nested():
            conn.execute(
                insert(kbs).values(
                    id=kb_id,
                    user_id=user_id,
                    name=name,
                    description=description,
                    embedder=embedder,
                    dim=dim,
                    revision=0,
                    created_at=ts,
                    updated_at=ts,
                )
            )
    except IntegrityError:
        return None
    return conn.execute(select(kbs).where(kbs.c.id == kb_id)).one()


class KbRow(NamedTuple):
    id: str
    user_id: str
    name: str
    description: str
    embedder: str
    dim: int
    revision: int
    created_at: datetime | None
    updated_at: datetime | None


# Looked up on every KB tool call: plain SQL (a Core select costs more to build than to run).
_KB = "SELECT id, user_id, name, description, embedder, dim, revision, created_at, updated_at FROM kb_bases"


def _kb_row(row: tuple[Any, ...] | None) -> KbRow | None:
    if row is None:
        return None
    kb = KbRow(*row)
    if isinstance(kb.created_at, str):  # SQLite hands back the stored text
        kb = kb._replace(created_at=_parse_ts(kb.created_at), updated_at=_parse_ts(kb.updated_at))
    return kb


def _parse_ts(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def get_kb(conn: Connection, kb_id: str) -> KbRow | None:
    return _kb_row(Sql(conn).one(f"{_KB} WHERE id = :id", {"id": kb_id}))


def find_kb(conn: Connection, user_id: str, ref: str) -> KbRow | None:
    """A KB by id or by name, among the user's own."""
    sql = Sql(conn)
    return _kb_row(
        sql.one(f"{_KB} WHERE user_id = :u AND (id = :ref OR name = :ref) ORDER BY id", {"u": user_id, "ref": ref})
    )


def list_kbs(conn: Connection, user_id: str) -> list[dict[str, Any]]:
    counts = (
        select(documents.c.kb_id, func.count().label("n"))
        .where(documents.c.status == READY)
        .group_by(documents.c.kb_id)
        .subquery()
    )
    rows = conn.execute(
        select(kbs, func.coalesce(counts.c.n, 0).label("documents"))
        .outerjoin(counts, counts.c.kb_id == kbs.c.id)
        .where(kbs.c.user_id == user_id)
        .order_by(kbs.c.name)
    ).all()
    return [{**kb_public(r), "documents": r.documents} for r in rows]


def bump_revision(conn: Connection, kb_id: str) -> int:
    sql = Sql(conn)
    return int(
        sql.scalar(
            "UPDATE kb_bases SET revision = revision + 1, updated_at = :ts WHERE id = :kb RETURNING revision",
            {"ts": sql.ts(now()), "kb": kb_id},
        )
    )


def _delete_chunk_rows(conn: Connection, column: str, value: str) -> int:
    """Every indexed row of the chunks whose `column` (kb_id or document_id) equals `value`."""
    chunk_ids = select(chunks.c.id).where(chunks.c[column] == value)
    if _sqlite(conn):
        conn.execute(
            text(f"DELETE FROM kb_chunks_fts WHERE rowid IN (SELECT id FROM kb_chunks WHERE {column} = :v)"),
            {"v": value},
        )
    conn.execute(delete(facts).where(facts.c[column] == value))
    conn.execute(delete(embeddings).where(embeddings.c.chunk_id.in_(chunk_ids)))
    return conn.execute(delete(chunks).where(chunks.c[column] == value)).rowcount


def delete_kb(conn: Connection, kb_id: str) -> dict[str, int]:
    # Lock the KB and its documents first: a concurrent ingestion batch waits or sees them gone.
    conn.execute(select(kbs.c.id).where(kbs.c.id == kb_id).with_for_update())
    docs = conn.execute(select(documents.c.id).where(documents.c.kb_id == kb_id).with_for_update()).all()
    removed = _delete_chunk_rows(conn, "kb_id", kb_id)
    conn.execute(delete(documents).where(documents.c.kb_id == kb_id))
    conn.execute(delete(jobs).where(jobs.c.kb_id == kb_id))
    conn.execute(delete(kbs).where(kbs.c.id == kb_id))
    return {"documents": len(docs), "chunks": removed}


# ---- documents


def register_document(
    conn: Connection, kb_id: str, user_id: str, title: str, filename: str | None, media_type: str | None,
    content_hash: str, size: int,
) -> Registered:  # fmt: skip
    """A new document and its job, or the existing one when the same content is already in this KB
    (a failed earlier attempt is replaced)."""
    sql = Sql(conn)
    existing = sql.one(
        "SELECT id, status FROM kb_documents WHERE kb_id = :kb AND content_hash = :h", {"kb": kb_id, "h": content_hash}
    )
    if existing is not None and existing[1] != "failed":
        job = sql.scalar(
            "SELECT id FROM kb_ingest_jobs WHERE document_id = :d ORDER BY created_at DESC", {"d": existing[0]}
        )
        return Registered(existing[0], job or "", True, existing[1])
    if existing is not None:
        delete_document(conn, kb_id, existing[0])
    ts = sql.ts(now())
    doc_id, job_id = new_id("doc"), new_id("job")
    sql.execute(
        "INSERT INTO kb_documents (id, kb_id, user_id, title, filename, media_type, content_hash, size, status, "
        "chunks, created_at, updated_at) VALUES (:id, :kb, :user, :title, :filename, :media_type, :hash, :size, "
        "'queued', 0, :ts, :ts)",
        {"id": doc_id, "kb": kb_id, "user": user_id, "title": title, "filename": filename,
         "media_type": media_type, "hash": content_hash, "size": size, "ts": ts},
    )  # fmt: skip
    sql.execute(
        "INSERT INTO kb_ingest_jobs (id, kb_id, document_id, user_id, status, stage, done, total, attempts, chunks, "
        "created_at, updated_at) VALUES (:id, :kb, :doc, :user, 'queued', 'queued', 0, 0, 0, 0, :ts, :ts)",
        {"id": job_id, "kb": kb_id, "doc": doc_id, "user": user_id, "ts": ts},
    )
    return Registered(doc_id, job_id, False, "queued")


def forget_document(conn: Connection, doc_id: str, job_id: str) -> None:
    """Undo `register_document` when the job could not be queued."""
    conn.execute(delete(jobs).where(jobs.c.id == job_id))
    conn.execute(delete(documents).where(documents.c.id == doc_id))


def list_documents(conn: Connection, kb_id: str, limit: int, cursor: str | None) -> dict[str, Any]:
    q = select(documents).where(documents.c.kb_id == kb_id).order_by(documents.c.id).limit(limit + 1)
    if cursor:
        q = q.where(documents.c.id > cursor)
    rows = conn.execute(q).all()
    items = [doc_public(r) for r in rows[:limit]]
    return {"items": items, "next_cursor": rows[limit - 1].id if len(rows) > limit else None}


def doc_public(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "kb": row.kb_id,
        "title": row.title,
        "filename": row.filename,
        "media_type": row.media_type,
        "size": row.size,
        "status": row.status,
        "chunks": row.chunks,
        "error": row.error,
        "content_hash": row.content_hash,
        "created_at": iso(row.created_at),
    }


def get_document(conn: Connection, kb_id: str, doc_id: str) -> Any:
    return conn.execute(select(documents).where(documents.c.kb_id == kb_id, documents.c.id == doc_id)).first()


def delete_document(conn: Connection, kb_id: str, doc_id: str) -> int:
    conn.execute(select(documents.c.id).where(documents.c.id == doc_id).with_for_update())
    removed = _delete_chunk_rows(conn, "document_id", doc_id)
    conn.execute(delete(jobs).where(jobs.c.document_id == doc_id))
    conn.execute(delete(documents).where(documents.c.id == doc_id, documents.c.kb_id == kb_id))
    return removed


# ---- indexing (the ingest worker)


@dataclass(frozen=True)
class Analysed:
    """Chunks of one document still to be written, with their vectors (one row per chunk) and
    facts (one list per chunk)."""

    kb_id: str
    document_id: str
    chunks: list[Chunk]
    vectors: np.ndarray
    facts: list[list[Fact]]


def existing_positions(conn: Connection, doc_id: str) -> set[int]:
    return positions_of(conn, [doc_id])[doc_id]


def positions_of(conn: Connection, doc_ids: Sequence[str]) -> dict[str, set[int]]:
    """Chunk positions already written, per document."""
    sql = Sql(conn)
    ids, params = sql.in_list("d", doc_ids)
    found: dict[str, set[int]] = {d: set() for d in doc_ids}
    for doc, position in sql.execute(f"SELECT document_id, position FROM kb_chunks WHERE document_id IN {ids}", params):
        found[doc].add(int(position))
    return found


def lock_document(conn: Connection, doc_id: str, kb_id: str) -> str:
    """Lock the document row for this transaction; returns its status, or raises DocumentGone.

    On PostgreSQL the KB row is share-locked first: every writer takes the KB before its
    documents (a KB delete locks the KB, then the documents), so they queue instead of
    deadlocking. SQLite's single writer lock covers both."""
    sql = Sql(conn)
    if sql.pg:
        sql.execute("SELECT id FROM kb_bases WHERE id = :kb FOR KEY SHARE", {"kb": kb_id})
    status = sql.scalar(sql.for_update("SELECT status FROM kb_documents WHERE id = :d"), {"d": doc_id})
    if status is None:
        raise DocumentGone(doc_id)
    return str(status)


def lock_documents(conn: Connection, kb_ids: Iterable[str], doc_ids: Iterable[str]) -> set[str]:
    """`lock_document` for many: KBs, then documents, each in id order (so two batches never
    deadlock). Returns the documents that still exist."""
    sql = Sql(conn)
    if sql.pg:
        kbs_in, params = sql.in_list("k", sorted(set(kb_ids)))
        sql.execute(f"SELECT id FROM kb_bases WHERE id IN {kbs_in} ORDER BY id FOR KEY SHARE", params)
    docs_in, params = sql.in_list("d", sorted(set(doc_ids)))
    rows = sql.execute(sql.for_update(f"SELECT id FROM kb_documents WHERE id IN {docs_in} ORDER BY id"), params)
    return {r[0] for r in rows.fetchall()}


def insert_chunks(conn: Connection, docs: Sequence[Analysed]) -> int:
    """Insert chunks keyed by (document, position), with their vectors, full-text rows and facts,
    a few multi-row statements for any number of documents. Rows already present (a redelivery,
    or a worker whose lease expired still running) are skipped along with their vectors and
    facts. Returns the number of chunks inserted."""
    sql = Sql(conn)
    new = sql.values(
        "INSERT INTO kb_chunks (kb_id, document_id, position, heading, text)",
        [(d.kb_id, d.document_id, c.position, c.heading, c.text) for d in docs for c in d.chunks],
        "ON CONFLICT (document_id, position) DO NOTHING RETURNING id, document_id, position",
    )
    if not new:
        return 0
    where = {(d.document_id, c.position): (d, i) for d in docs for i, c in enumerate(d.chunks)}
    placed = [(int(chunk_id), *where[(doc_id, int(position))]) for chunk_id, doc_id, position in new]
    sql.values(
        "INSERT INTO kb_embeddings (chunk_id, kb_id, vector)",
        [(cid, d.kb_id, d.vectors[i].astype("<f4").tobytes()) for cid, d, i in placed],
    )
    if not sql.pg:
        sql.values(
            "INSERT INTO kb_chunks_fts (rowid, heading, text)",
            [(cid, d.chunks[i].heading, d.chunks[i].text) for cid, d, i in placed],
        )
    sql.values(
        "INSERT INTO kb_facts (kb_id, document_id, chunk_id, subject, relation, object, subject_norm, object_norm)",
        [
            (d.kb_id, d.document_id, cid, f.subject[:500], f.relation[:200], f.object[:500], f.subject_norm,
             f.object_norm)
            for cid, d, i in placed
            for f in d.facts[i]
        ],
    )  # fmt: skip
    return len(new)


def insert_batch(
    conn: Connection, kb_id: str, doc_id: str, batch: list[Chunk], vectors: np.ndarray, batch_facts: list[list[Fact]]
) -> int:
    """One document's batch (`insert_chunks`), after locking the document."""
    lock_document(conn, doc_id, kb_id)
    return insert_chunks(conn, [Analysed(kb_id, doc_id, batch, vectors, batch_facts)])


def chunk_counts(conn: Connection, doc_ids: Sequence[str]) -> dict[str, int]:
    sql = Sql(conn)
    ids, params = sql.in_list("d", doc_ids)
    rows = sql.execute(
        f"SELECT document_id, COUNT(*) FROM kb_chunks WHERE document_id IN {ids} GROUP BY document_id", params
    )
    counts = dict.fromkeys(doc_ids, 0)
    counts.update({doc: int(n) for doc, n in rows.fetchall()})
    return counts


def set_ready(conn: Connection, docs: Sequence[tuple[str, int, str | None]]) -> None:
    """(document, chunks, title or None to keep it) → searchable."""
    sql = Sql(conn)
    ts = sql.ts(now())
    sql.executemany(
        "UPDATE kb_documents SET status = 'ready', chunks = :chunks, error = NULL, title = COALESCE(:title, title), "
        "updated_at = :ts WHERE id = :id",
        ({"id": doc, "chunks": n, "title": title, "ts": ts} for doc, n, title in docs),
    )


_DOC_COLUMNS = frozenset({"status", "chunks", "error", "title"})


def set_document(conn: Connection, doc_id: str, **values: Any) -> None:
    update_row(conn, "kb_documents", _DOC_COLUMNS, doc_id, values)


def count_chunks(conn: Connection, doc_id: str) -> int:
    return int(Sql(conn).scalar("SELECT COUNT(*) FROM kb_chunks WHERE document_id = :d", {"d": doc_id}))


def document_text(conn: Connection, doc_id: str, limit: int) -> tuple[str, bool]:
    """A document's text as indexed: its chunks in order, at most `limit` characters (and whether
    it was cut)."""
    rows = conn.execute(select(chunks.c.text).where(chunks.c.document_id == doc_id).order_by(chunks.c.position))
    parts: list[str] = []
    size = 0
    for (part,) in rows:
        if size + len(part) > limit:
            parts.append(part[: max(limit - size, 0)])
            return "\n\n".join(parts), True
        parts.append(part)
        size += len(part) + 2
    return "\n\n".join(parts), False
