"""Tables owned by tools_go_equiv (nobody else reads or writes them), created idempotently.

Full-text search is dialect specific: an FTS5 table keyed by chunk id on SQLite, a generated
`tsvector` column with a GIN index on PostgreSQL."""

from __future__ import annotations

import logging
import time

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.exc import DBAPIError

from services.tools_go_equiv.db.engine import Db

log = logging.getLogger("agentix.tools_go.schema")
metadata = MetaData()
Id = BigInteger().with_variant(Integer, "sqlite")  # SQLite only autoincrements INTEGER keys


def _ts(name: str, nullable: bool = False) -> Column:
    return Column(name, DateTime(timezone=True), nullable=nullable)


kbs = Table(
    "kb_bases",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("user_id", String(200), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("embedder", String(300), nullable=False),
    Column("dim", Integer, nullable=False),
    # Grows with every change of the searchable content; caches compare it.
    Column("revision", Integer, nullable=False, default=0),
    _ts("created_at"),
    _ts("updated_at"),
    UniqueConstraint("user_id", "name", name="uq_kb_user_name"),
)

documents = Table(
    "kb_documents",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("kb_id", String(40), ForeignKey("kb_bases.id"), nullable=False, index=True),
    Column("user_id", String(200), nullable=False),
    Column("title", Text, nullable=False, default=""),
    Column("filename", Text),
    Column("media_type", String(200)),
    Column("content_hash", String(64), nullable=False),
    Column("size", BigInteger, nullable=False, default=0),
    # queued → ingesting → ready | failed. Only `ready` documents are searchable.
    Column("status", String(20), nullable=False),
    Column("chunks", Integer, nullable=False, default=0),
    Column("error", Text),
    _ts("created_at"),
    _ts("updated_at"),
    UniqueConstraint("kb_id", "content_hash", name="uq_doc_kb_hash"),
)

chunks = Table(
    "kb_chunks",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("kb_id", String(40), ForeignKey("kb_bases.id"), nullable=False, index=True),
    Column("document_id", String(40), ForeignKey("kb_documents.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("heading", Text, nullable=False, default=""),
    Column("text", Text, nullable=False),
    # Idempotent ingestion: one row per (document, position), whatever the redeliveries.
    UniqueConstraint("document_id", "position", name="uq_chunk_doc_pos"),
)

embeddings = Table(
    "kb_embeddings",
    metadata,
    Column("chunk_id", Id, ForeignKey("kb_chunks.id"), primary_key=True),
    Column("kb_id", String(40), nullable=False, index=True),
    Column("vector", LargeBinary, nullable=False),  # float32, little endian, L2-normalised
)

facts = Table(
    "kb_facts",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("kb_id", String(40), ForeignKey("kb_bases.id"), nullable=False),
    Column("document_id", String(40), ForeignKey("kb_documents.id"), nullable=False, index=True),
    Column("chunk_id", Id, ForeignKey("kb_chunks.id"), nullable=False, index=True),
    Column("subject", Text, nullable=False),
    Column("relation", String(200), nullable=False),
    Column("object", Text, nullable=False),
    Column("subject_norm", String(300), nullable=False),
    Column("object_norm", String(300), nullable=False),
    Index("ix_facts_kb_subject", "kb_id", "subject_norm"),
    Index("ix_facts_kb_object", "kb_id", "object_norm"),
)

jobs = Table(
    "kb_ingest_jobs",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("kb_id", String(40), nullable=False, index=True),
    Column("document_id", String(40), nullable=False, index=True),
    Column("user_id", String(200), nullable=False),
    Column("status", String(20), nullable=False),
    Column("stage", String(40), nullable=False, default="queued"),
    Column("done", Integer, nullable=False, default=0),
    Column("total", Integer, nullable=False, default=0),
    Column("attempts", Integer, nullable=False, default=0),
    Column("chunks", Integer, nullable=False, default=0),
    Column("error", Text),
    _ts("created_at"),
    _ts("updated_at"),
)

memories = Table(
    "memories",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("user_id", String(200), nullable=False),
    Column("key", String(200), nullable=False),
    Column("value", Text, nullable=False),  # JSON
    _ts("created_at"),
    _ts("updated_at"),
    _ts("deleted_at", nullable=True),
    UniqueConstraint("user_id", "key", name="uq_memory_user_key"),
)

history = Table(
    "history",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("user_id", String(200), nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("role", String(40), nullable=False),
    Column("content", Text, nullable=False),
    _ts("created_at"),
    Index("ix_history_session", "user_id", "session_id", "id"),
)

reports = Table(
    "reports",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("user_id", String(200), nullable=False, index=True),
    Column("title", Text, nullable=False),
    Column("task_id", String(100)),
    # {"md": {"object", "size"}, "docx": {…}, "pdf": {…}} — files live in the object store.
    Column("files", Text, nullable=False, default="{}"),
    _ts("created_at"),
    _ts("updated_at"),
)

SQLITE_FTS = "CREATE VIRTUAL TABLE IF NOT EXISTS kb_chunks_fts USING fts5(heading, text, tokenize='porter unicode61')"
PG_FTS = (
    "ALTER TABLE kb_chunks ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED ALWAYS AS "
    "(to_tsvector('english', coalesce(heading, '') || ' ' || text)) STORED",
    "CREATE INDEX IF NOT EXISTS ix_chunks_tsv ON kb_chunks USING gin (tsv)",
)
ALL_TABLES = [t.name for t in metadata.sorted_tables]


def create_schema(db: Db, attempts: int = 5) -> None:
    """Idempotent; retried because replicas starting together race on PostgreSQL's catalog."""
    for attempt in range(attempts):
        try:
            with db.tx() as conn:
                metadata.create_all(conn)
                if db.is_sqlite:
                    conn.exec_driver_sql(SQLITE_FTS)
                else:
                    for ddl in PG_FTS:
                        conn.exec_driver_sql(ddl)
            return
        except DBAPIError as exc:
            if attempt == attempts - 1:
                raise
            log.info("schema creation raced (%s); retrying", type(exc.orig).__name__)
            time.sleep(0.2 * (attempt + 1))
