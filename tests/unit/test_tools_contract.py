"""The ingestion contract: one content source per job, the dedupe id of BUS.md, JSON round trip."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from services.tools_go_equiv.kb.vectors import Entry, VectorCache
from shared.bus.names import Names
from shared.contract.ingest import IngestJob, IngestJobState, KbChanged

JOB = {"job_id": "job_1", "kb": "kb_1", "document_id": "doc_1", "user_id": "u", "title": "t", "content_hash": "ab"}


def test_a_job_carries_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        IngestJob(**JOB)
    with pytest.raises(ValidationError, match="exactly one"):
        IngestJob(**JOB, text="x", content_ref="uploads/1")
    job = IngestJob(**JOB, content_ref="uploads/1", filename="a.pdf", media_type="application/pdf")
    assert IngestJob.from_bytes(job.to_bytes()) == job
    assert job.msg_id == "ab:kb_1"  # BUS.md: content hash + kb


def test_state_and_change_round_trip() -> None:
    state = IngestJobState(job_id="job_1", kb="kb_1", document_id="doc_1", status="failed", error="bad PDF")
    assert IngestJobState.from_bytes(state.to_bytes()) == state
    with pytest.raises(ValidationError):
        IngestJobState(job_id="j", kb="k", document_id="d", status="exploded")
    assert KbChanged.from_bytes(KbChanged(kb="kb_1", revision=3).to_bytes()).revision == 3
    assert Names("AGENTIX", "agentix").uploads_bucket == "agentix_uploads"


def test_vector_cache_drops_least_recently_used_kbs_over_its_row_budget() -> None:
    cache = VectorCache(db=None, max_rows=1_000)  # type: ignore[arg-type]

    def entry(rows: int) -> Entry:
        return Entry(1, np.arange(rows), np.zeros((rows, 4), dtype=np.float32))

    cache.remember("a", entry(400))
    cache.remember("b", entry(400))
    cache.remember("a", cache._entries["a"])  # "a" used again
    cache.remember("c", entry(400))
    assert list(cache._entries) == ["a", "c"] and cache.stats()["rows"] == 800
    cache.remember("huge", entry(5_000))  # over budget alone: still kept (the search needs it)
    assert list(cache._entries) == ["huge"]
    cache.invalidate("huge")
    assert cache.stats() == {"kbs": 0, "rows": 0, "loads": 0, "invalidations": 1}
