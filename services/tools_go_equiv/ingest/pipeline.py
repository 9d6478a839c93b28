"""One ingestion job: parse (tools_py `doc_parse` over NATS) → chunk → embed in batches → index.

Idempotent and resumable: chunking is deterministic and rows are keyed by (document, position),
so a redelivered job skips what an earlier attempt already committed and writes the rest."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from services.tools_go_equiv import objects
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.kb.chunk import Chunk, chunk_sections
from services.tools_go_equiv.kb.embed import LocalEmbedder
from services.tools_go_equiv.kb.facts import extract_facts
from services.tools_go_equiv.runtime import Runtime
from shared.bus.events import EventPublisher
from shared.contract.events import ProgressEvent, StatusEvent
from shared.contract.ingest import IngestJob
from shared.contract.tools import ToolMeta

log = logging.getLogger("agentix.tools_go.ingest")
Touch = Callable[[], Awaitable[None]]


class IngestError(Exception):
    """A reason the job could not be done (retried until the attempts run out)."""


class JobGone(Exception):
    """The job's row no longer exists (its KB was deleted)."""


async def parse(rt: Runtime, job: IngestJob) -> dict[str, Any]:
    args: dict[str, Any] = {"filename": job.filename, "media_type": job.media_type}
    if job.text is not None:
        args["text"] = job.text
    else:
        args["object_name"] = job.content_ref
    reply = await rt.tools.call("doc_parse", args, ToolMeta(user_id=job.user_id), timeout_s=rt.kb.parse_timeout_s)
    if not reply.ok or reply.error is not None:
        code = reply.error.code if reply.error else "error"
        message = reply.error.message if reply.error else "no result"
        raise IngestError(f"parsing failed ({code}): {message}")
    result = dict(reply.result or {})
    if "result_ref" in result:  # too large for one message: doc_parse left it in the uploads store
        bucket = await objects.uploads(rt.bus)
        result = json.loads(await objects.read_all(bucket, result["result_ref"]))
    return result


async def _analyse(rt: Runtime, embedder_name: str, batch: list[Chunk], context: str) -> tuple[Any, list[Any]]:
    """Vectors and facts of a batch; CPU-bound work runs off the event loop (leases stay alive)."""
    embedder = rt.embedders.for_name(embedder_name)
    texts = [c.index_text for c in batch]

    def facts_of() -> list[Any]:
        return [extract_facts(c.text, context) for c in batch]

    if isinstance(embedder, LocalEmbedder):
        return await asyncio.to_thread(lambda: (embedder.embed_sync(texts), facts_of()))
    return await embedder.embed(texts), await asyncio.to_thread(facts_of)


def _load(conn: Any, job: IngestJob) -> tuple[Any, Any, set[int]]:
    return jobs.get_job(conn, job.job_id), store.get_kb(conn, job.kb), store.existing_positions(conn, job.document_id)


async def run_job(rt: Runtime, job: IngestJob, attempt: int, events: EventPublisher, touch: Touch) -> int:
    """Process one job; returns the document's chunk count. Raises store.DocumentGone, JobGone,
    IngestError (or anything else) when it cannot finish.

    Writes are few on purpose (the database has one writer at a time on SQLite): each batch is one
    transaction, the first also records the attempt and the last also publishes the document, so a
    small document costs one write transaction."""
    db = rt.db
    # Positions written by an earlier attempt (reading them early is safe: inserts skip duplicates).
    row, kb, have = await db.read(_load, job)
    if row is None or kb is None:
        raise JobGone(job.job_id)
    if row.status == "done":  # a redelivery of finished work: nothing to do
        return int(row.chunks)
    await events.emit(StatusEvent(task_id=job.job_id, status="running", retry=attempt - 1 if attempt > 1 else None))

    parsed = await parse(rt, job)
    await events.emit(ProgressEvent(task_id=job.job_id, stage="parse", done=1, total=1))
    pieces = chunk_sections(parsed.get("sections") or [], rt.kb.chunk_size, rt.kb.chunk_overlap)
    if not pieces:
        raise IngestError("the document contains no text")
    total = len(pieces)
    context = job.title or parsed.get("title") or job.filename or ""
    title = None if job.title else (parsed.get("title") or None)
    todo = [c for c in pieces if c.position not in have]
    done = total - len(todo)
    if done:  # resuming: say how far the earlier attempt got
        await events.emit(ProgressEvent(task_id=job.job_id, stage="index", done=done, total=total))

    size = rt.kb.embed_batch
    batches = [todo[i : i + size] for i in range(0, len(todo), size)] or [[]]
    result: tuple[int, int] | None = None
    for n, batch in enumerate(batches):
        vectors, batch_facts = await _analyse(rt, kb.embedder, batch, context) if batch else (None, [])
        done += len(batch)
        first, last = n == 0, n == len(batches) - 1

        def write(
            conn: Any, b: list[Chunk] = batch, v: Any = vectors, f: Any = batch_facts, d: int = done,
            first: bool = first, last: bool = last,
        ) -> tuple[int, int] | None:  # fmt: skip
            if first:
                jobs.start_attempt(conn, job.job_id, job.document_id, job.kb, attempt)
            if b:
                store.insert_batch(conn, job.kb, job.document_id, b, v, f)
            jobs.set_job(conn, job.job_id, stage="index", done=d, total=total)
            return jobs.finish(conn, job.job_id, job.document_id, job.kb, title) if last else None

        result = await db.run(write)
        await events.emit(ProgressEvent(task_id=job.job_id, stage="index", done=done, total=total))
        if not last:
            await touch()

    assert result is not None
    count, revision = result
    await rt.kb_changed(job.kb, revision, f"document {job.document_id} ready")
    return count
