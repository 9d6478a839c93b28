"""Knowledge-base ingestion jobs on the `P.ingest.jobs` work queue, and the job state a client reads.

A job carries either the document text inline or `content_ref`, the name of an object in the
uploads object store (large uploads never travel inside a message)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator

from shared.contract.base import Contract, utcnow

JobStatus = Literal["queued", "running", "done", "failed"]
TERMINAL_JOB: frozenset[str] = frozenset({"done", "failed"})

# Uploads at or below this size travel inline (base64 in a tool call / text in the job).
INLINE_UPLOAD_MAX = 256 * 1024


class IngestJob(Contract):
    job_id: str
    kb: str = Field(description="knowledge-base id")
    document_id: str
    user_id: str
    title: str
    filename: str | None = None
    media_type: str | None = None
    content_ref: str | None = Field(default=None, description="object name in the uploads bucket")
    text: str | None = None
    content_hash: str
    submitted_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _one_source(self) -> IngestJob:
        if (self.content_ref is None) == (self.text is None):
            raise ValueError("an ingest job carries exactly one of content_ref and text")
        return self

    @property
    def msg_id(self) -> str:
        """JetStream dedupe id (BUS.md): document content hash + kb."""
        return f"{self.content_hash}:{self.kb}"


class IngestJobState(Contract):
    job_id: str
    kb: str
    document_id: str
    status: JobStatus
    stage: str = "queued"
    done: int = 0
    total: int = 0
    attempts: int = 0
    chunks: int = 0
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class KbChanged(Contract):
    """Core publish on `P.kb.changed.<kb>` after a KB's searchable content changed: every
    tools_go_equiv replica drops its cached vectors for that KB."""

    kb: str
    revision: int
    reason: str = ""
