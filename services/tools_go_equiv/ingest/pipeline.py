"""A batch of ingestion jobs: parse (tools_py over NATS, the batch's small documents in one
request) → chunk → embed → index.

Small documents (at most `embed_batch` chunks left to write) are embedded together and written
in one transaction; their events are `running`, then `done` with the chunk count. A larger
document is written in batches of `embed_batch` chunks, a transaction each, with a progress
event and a lease renewal after each, so a crash loses at most one batch of work.

Idempotent and resumable: chunking is deterministic and rows are keyed by (document, position),
so a redelivered job skips what an earlier attempt already committed and writes the rest."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.ingest.parse import IngestError, parse_all
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.kb.chunk import Chunk, chunk_sections
from services.tools_go_equiv.kb.embed import Embedder, LocalEmbedder
from services.tools_go_equiv.kb.facts import Fact, extract_facts
from services.tools_go_equiv.runtime import Runtime
from shared.bus.events import EventPublisher
from shared.contract.events import ProgressEvent, StatusEvent
from shared.contract.ingest import IngestJob
from shared.errors import AgentixError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("agentix.tools_go.ingest")
Touch = Callable[[], Awaitable[None]]
__all__ = ["IngestError", "JobGone", "Settle", "Work", "run_batch"]
Outcome = int | BaseException  # chunks indexed, or why the attempt failed


class JobGone(AgentixError):
    """The job's row no longer exists (its KB was deleted); the message is the job's id."""

    code = "not_found"
    http_status = 404
    retryable = False  # no attempt brings it back: the job ends now


@dataclass
class Work:
    """One delivered job; `outcome` is set by `run_batch`."""

    job: IngestJob
    attempt: int
    events: EventPublisher
    touch: Touch
    outcome: Outcome | None = None


Settle = Callable[[list["Work"]], Awaitable[None]]


@dataclass
class Doc:
    """A parsed and chunked document, ready to index."""

    work: Work
    embedder: str
    chunks: list[Chunk]
    todo: list[Chunk]  # the chunks no earlier attempt wrote
    context: str  # the document's name, for facts
    title: str | None  # the parsed title, when the job brought none

    @property
    def job(self) -> IngestJob:
        return self.work.job


async def run_batch(rt: Runtime, works: list[Work], settle: Settle) -> None:
    """Index the jobs of one fetch. Each work gets its `outcome` and is handed to `settle` as
    soon as it is final — a small document does not wait for a large one of the same batch."""
    views = await rt.db.read(jobs.load_views, [(w.job.job_id, w.job.kb, w.job.document_id) for w in works])
    started: list[tuple[Work, jobs.JobView]] = []
    for w in works:
        view = views.get(w.job.job_id)
        if view is None or view.embedder is None:
            w.outcome = JobGone(w.job.job_id)
        elif view.status == "done":  # a redelivery of finished work: nothing to do
            w.outcome = view.chunks
        else:
            started.append((w, view))
            retry = w.attempt - 1 if w.attempt > 1 else None
            await w.events.emit(StatusEvent(task_id=w.job.job_id, status="running", retry=retry))
    if len(started) < len(works):
        await settle([w for w in works if w.outcome is not None])

    parsed = await parse_all(rt, [w.job for w, _ in started])
    small: list[Doc] = []
    large: list[Doc] = []
    for (w, view), result in zip(started, parsed, strict=True):
        if isinstance(result, Exception):
            w.outcome = result
            continue
        pieces = chunk_sections(result.get("sections") or [], rt.settings.kb_chunk_size, rt.settings.kb_chunk_overlap)
        if not pieces:
            w.outcome = IngestError("the document contains no text")
            continue
        doc = Doc(
            work=w,
            embedder=view.embedder or "",
            chunks=pieces,
            todo=[c for c in pieces if c.position not in view.have],
            context=w.job.title or result.get("title") or w.job.filename or "",
            title=None if w.job.title else (result.get("title") or None),
        )
        (small if len(doc.todo) <= rt.settings.kb_embed_batch else large).append(doc)
    unparsed = [w for w, _ in started if w.outcome is not None]
    if unparsed:
        await settle(unparsed)

    async def index(docs: list[Doc], indexer: Callable[[Runtime, list[Doc], dict[str, int]], Awaitable[None]]) -> None:
        revisions: dict[str, int] = {}
        await indexer(rt, docs, revisions)
        for kb, revision in revisions.items():  # before `done`: a client that then searches finds it
            try:
                await rt.kb_changed(kb, revision, "documents ingested")
            except Exception as exc:  # searches compare revisions anyway: a missed message is no harm
                log.warning("could not announce the change of %s: %s", kb, exc)
        await settle([d.work for d in docs])

    await asyncio.gather(*([index(small, index_together)] if small else []), *(index([d], index_alone) for d in large))


async def index_together(rt: Runtime, docs: list[Doc], revisions: dict[str, int]) -> None:
    """Embed all chunks of small documents in one batch per embedder and commit them in one
    transaction; if that transaction fails, each document is retried in its own, so one bad
    document cannot fail the others."""
    if not docs:
        return
    local: dict[str, list[Doc]] = {}
    vectors: dict[int, np.ndarray] = {}  # id(doc) → its vectors, for remote embedders
    for name in sorted({d.embedder for d in docs}):
        group = [d for d in docs if d.embedder == name]
        try:
            embedder = rt.embedders.for_name(name)
            if isinstance(embedder, LocalEmbedder):
                local[name] = group
            else:
                for d, v in zip(group, await _embed_remote(rt, embedder, group), strict=True):
                    vectors[id(d)] = v
        except Exception as exc:
            for d in group:
                d.work.outcome = exc
    todo = [d for d in docs if d.work.outcome is None]
    if not todo:
        return
    # Model facts are I/O: gather them here, before the CPU-bound step in a worker thread.
    model_facts = {id(d): await _model_facts(rt, d.todo, d.context) for d in todo} if rt.fact_model else {}

    def analyse_and_write() -> list[tuple[Doc, Outcome, int | None]]:
        for name, group in local.items():
            embedder = rt.embedders.for_name(name)
            assert isinstance(embedder, LocalEmbedder)
            matrix = embedder.embed_sync([c.index_text for d in group for c in d.todo])
            row = 0
            for d in group:
                vectors[id(d)] = matrix[row : row + len(d.todo)]
                row += len(d.todo)
        items = [
            jobs.Finish(d.job.job_id, d.work.attempt, d.title,
                        _rows(d, vectors[id(d)], model_facts.get(id(d)) or _facts(d.todo, d.context)))
            for d in todo
        ]
        try:
            with rt.db.tx() as conn:
                results: dict[str, tuple[int, int] | BaseException] = dict(jobs.finish_all(conn, items))
        except Exception:
            log.warning("writing %d documents together failed; writing them one by one", len(items), exc_info=True)
            results = {}
            for item in items:
                try:
                    with rt.db.tx() as conn:
                        results |= jobs.finish_all(conn, [item])
                except Exception as exc:
                    results[item.job_id] = exc
        out: list[tuple[Doc, Outcome, int | None]] = []
        for d in todo:
            result = results[d.job.job_id]
            out.append((d, result, None) if isinstance(result, BaseException) else (d, *result))
        return out

    try:
        written = await asyncio.to_thread(analyse_and_write)
    except Exception as exc:
        for d in todo:
            d.work.outcome = exc
        return
    for d, outcome, revision in written:
        d.work.outcome = outcome
        if revision is not None:
            revisions[d.job.kb] = max(revision, revisions.get(d.job.kb, 0))


async def _embed_remote(rt: Runtime, embedder: Embedder, docs: list[Doc]) -> list[np.ndarray]:
    texts = [c.index_text for d in docs for c in d.todo]
    size = rt.settings.kb_embed_batch
    parts = [await embedder.embed(texts[i : i + size]) for i in range(0, len(texts), size)]
    import numpy as np

    matrix = np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)
    out, row = [], 0
    for d in docs:
        out.append(matrix[row : row + len(d.todo)])
        row += len(d.todo)
    return out


def _facts(chunks: list[Chunk], context: str) -> list[list[Fact]]:
    return [extract_facts(c.text, context) for c in chunks]


async def _model_facts(rt: Runtime, chunks: list[Chunk], context: str) -> list[list[Fact]]:
    assert rt.fact_model is not None
    return await rt.fact_model.extract_all([c.text for c in chunks], context)


def _rows(d: Doc, vectors: np.ndarray, facts: list[list[Fact]]) -> store.Analysed:
    return store.Analysed(d.job.kb, d.job.document_id, d.todo, vectors, facts)


async def _analyse(rt: Runtime, embedder_name: str, batch: list[Chunk], context: str) -> tuple[Any, list[Any]]:
    """Vectors and facts of a batch; CPU-bound work runs off the event loop (leases stay alive)."""
    embedder = rt.embedders.for_name(embedder_name)
    texts = [c.index_text for c in batch]
    if rt.fact_model is not None:
        facts = await _model_facts(rt, batch, context)
        vectors = await (asyncio.to_thread(embedder.embed_sync, texts) if isinstance(embedder, LocalEmbedder)
                         else embedder.embed(texts))
        return vectors, facts
    if isinstance(embedder, LocalEmbedder):
        return await asyncio.to_thread(lambda: (embedder.embed_sync(texts), _facts(batch, context)))
    return await embedder.embed(texts), await asyncio.to_thread(_facts, batch, context)


async def index_alone(rt: Runtime, docs: list[Doc], revisions: dict[str, int]) -> None:
    (doc,) = docs
    try:
        count, revision = await _index_in_batches(rt, doc)
    except Exception as exc:
        doc.work.outcome = exc
        return
    doc.work.outcome = count
    revisions[doc.job.kb] = max(revision, revisions.get(doc.job.kb, 0))


async def _index_in_batches(rt: Runtime, doc: Doc) -> tuple[int, int]:
    """A large document: one transaction per `embed_batch` chunks — the first also records the
    attempt, the last also publishes the document — with progress and a lease renewal after each."""
    job, events, attempt = doc.job, doc.work.events, doc.work.attempt
    await events.emit(ProgressEvent(task_id=job.job_id, stage="parse", done=1, total=1))
    total = len(doc.chunks)
    done = total - len(doc.todo)
    if done:  # resuming: say how far the earlier attempt got
        await events.emit(ProgressEvent(task_id=job.job_id, stage="index", done=done, total=total))
    size = rt.settings.kb_embed_batch
    batches = [doc.todo[i : i + size] for i in range(0, len(doc.todo), size)] or [[]]
    result: tuple[int, int] | None = None
    for n, batch in enumerate(batches):
        vectors, batch_facts = await _analyse(rt, doc.embedder, batch, doc.context) if batch else (None, [])
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
            return jobs.finish(conn, job.job_id, job.document_id, job.kb, doc.title) if last else None

        result = await rt.db.run_grouped(write)  # shares its commit with other documents' writes
        await events.emit(ProgressEvent(task_id=job.job_id, stage="index", done=done, total=total))
        if not last:
            await doc.work.touch()
    assert result is not None
    return result
