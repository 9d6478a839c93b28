"""The ingestion worker: what a job on the `ingest` work queue means. The queue mechanics are
`shared.bus.workqueue`'s: up to the consumer's `max_ack_pending` jobs in flight (a bound the
server also enforces across replicas), taken as `ingest_concurrency` batches, leases renewed
while a batch runs, bounded deliveries, drain.

A batch is parsed concurrently, its small documents are embedded together and committed in one
transaction, and each job is acked only after the commit that made it durable. A failing job is
handed back for another delivery with backoff (`REDELIVERY`) while its failure is `retryable`
(any failure but a described one that says otherwise, such as its document deleted meanwhile);
on its last delivery, or at once when no attempt can do it, it is marked `failed` with the
reason. A job whose worker died on every attempt is caught by the MAX_DELIVERIES advisory
(kept in the dead-letter stream) and marked too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from pydantic import ValidationError

from services.tools_go_equiv import objects
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.ingest.pipeline import IngestError, JobGone, Work, run_batch
from services.tools_go_equiv.kb.embed import EmbedderUnavailable
from services.tools_go_equiv.kb.store import DocumentGone
from services.tools_go_equiv.runtime import Runtime
from shared.backoff import Backoff
from shared.bus.delivery import Ack, Delivery, Nak, Term
from shared.bus.events import EventPublisher, last_event_n
from shared.bus.tracing import consumer_span, extract_context
from shared.bus.workqueue import WorkQueue
from shared.contract.events import DoneEvent, StatusEvent
from shared.contract.ingest import IngestJob
from shared.errors import AgentixError

log = logging.getLogger("agentix.tools_go.ingest")
tracer = trace.get_tracer("agentix.tools_go.ingest")
FETCH_WAIT_S = 0.5
MAX_BATCH = 64  # jobs per batch (and per transaction) at most
CRASH_RETRY_S = 1.0  # e.g. NATS went away while a batch was settled: let its jobs come back soon
# A failed job comes back 1 s after its first delivery failed, doubling up to 30 s.
REDELIVERY = Backoff(first_s=1.0, max_s=30.0)
GONE = "the document or its knowledge base was deleted during ingestion"


def describe(exc: BaseException) -> str:
    if isinstance(exc, DocumentGone | JobGone):  # their message is only an id
        return GONE
    if isinstance(exc, IngestError | EmbedderUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:1000]


class IngestWorker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.bus = rt.bus
        names, settings = rt.bus.names, rt.settings
        self.queue = WorkQueue(
            rt.bus, names.ingest_stream, names.ingest_consumer, handle_batch=self._run, on_exhausted=self._on_exhausted,
            concurrency=rt.settings.kb_ingest_concurrency, capacity=settings.ingest_max_ack_pending,
            capacity_from_consumer=True, max_batch=MAX_BATCH, ack_wait_s=settings.ingest_ack_wait_s,
            max_deliver=settings.ingest_max_deliver, fetch_wait_s=FETCH_WAIT_S, crash_retry_s=CRASH_RETRY_S,
        )
        self.done = 0
        self.failed = 0

    @property
    def inflight(self) -> int:
        return self.queue.inflight

    async def start(self) -> None:
        await self.queue.start()

    async def stop(self, timeout_s: float = 25.0) -> None:
        """Stop fetching, let running batches finish, hand back (nak) the jobs of those that do not."""
        await self.queue.drain(timeout_s)

    async def _run(self, batch: list[Delivery]) -> None:
        pairs = await self._accept(batch)
        unsettled = {id(w): d for w, d in pairs}

        async def settle(works: list[Work]) -> None:
            ready = [(w, unsettled.pop(id(w))) for w in works if id(w) in unsettled]
            await self._settle(ready)

        if pairs:
            try:
                with self._span(pairs):
                    await run_batch(self.rt, [w for w, _ in pairs], settle)
            except Exception as exc:  # e.g. the database is unreachable: this attempt failed
                log.warning("ingest batch failed: %s", describe(exc))
                for w, _ in pairs:
                    if w.outcome is None:
                        w.outcome = exc
            await settle([w for w, _ in pairs if id(w) in unsettled])

    async def _accept(self, batch: list[Delivery]) -> list[tuple[Work, Delivery]]:
        pairs: list[tuple[Work, Delivery]] = []
        for delivery in batch:
            try:
                job = IngestJob.from_bytes(delivery.data)
            except ValidationError as exc:
                log.error("dropping a malformed ingest job: %s", exc)
                with contextlib.suppress(Exception):
                    await delivery.settle(Term())
                continue
            work = Work(job, delivery.attempt, EventPublisher(self.bus, job.job_id, start_n=1), delivery.renew)
            pairs.append((work, delivery))
        # On a first delivery only kb_ingest's `queued` event precedes ours; later, ask the stream.
        again = [w for w, _ in pairs if w.attempt > 1]
        numbers = await asyncio.gather(*(last_event_n(self.bus, w.job.job_id) for w in again))
        for w, n in zip(again, numbers, strict=True):
            w.events.n = n
        return pairs

    @contextlib.contextmanager
    def _span(self, pairs: list[tuple[Work, Delivery]]) -> Iterator[None]:
        """A lone job continues its uploader's trace; a batch links to each of theirs."""
        if len(pairs) == 1:
            work, delivery = pairs[0]
            with consumer_span("ingest job", delivery.headers, **{"agentix.job_id": work.job.job_id}):
                yield
            return
        contexts = [trace.get_current_span(extract_context(d.headers)).get_span_context() for _, d in pairs]
        links = [Link(c) for c in contexts if c.is_valid]
        with tracer.start_as_current_span(
            "ingest batch", kind=SpanKind.CONSUMER, links=links, attributes={"agentix.jobs": len(pairs)}
        ):
            yield

    async def _settle(self, pairs: list[tuple[Work, Delivery]]) -> None:
        """Indexed jobs: `done` event, then ack, all together. The others one by one."""
        indexed = [(w, d) for w, d in pairs if isinstance(w.outcome, int)]
        announced = await asyncio.gather(*(self._announce(w) for w, _ in indexed), return_exceptions=True)
        acks = []
        for (w, delivery), error in zip(indexed, announced, strict=True):
            if isinstance(error, BaseException):  # the `done` event may be lost: do it again
                log.warning("ingest job %s: done event not stored (%s); redelivering", w.job.job_id, error)
                with contextlib.suppress(Exception):
                    await delivery.settle(Nak())
            else:
                acks.append(delivery)
        await asyncio.gather(*(self._ack(delivery) for delivery in acks))
        self.done += len(acks)
        for w, delivery in pairs:
            if not isinstance(w.outcome, int):
                await self._failed(w, delivery)

    async def _announce(self, w: Work) -> None:
        await self._cleanup(w.job)  # the upload is no longer needed (a redelivery finds the job done)
        job, chunks = w.job, int(w.outcome)  # type: ignore[arg-type]
        await w.events.emit(DoneEvent(task_id=job.job_id, status="done", document_id=job.document_id, chunks=chunks))
        await w.events.flush()

    async def _failed(self, w: Work, delivery: Delivery) -> None:
        job, attempt, events = w.job, w.attempt, w.events
        exc = w.outcome if isinstance(w.outcome, BaseException) else RuntimeError("no outcome")
        reason = describe(exc)
        # No attempt can do it (its document or KB was deleted): it ends now. A failure nobody
        # described (the database unreachable, a bug) may pass, and is tried again.
        if isinstance(exc, AgentixError) and not exc.retryable:
            with contextlib.suppress(Exception):
                await self.rt.db.run_grouped(self._fail_if_present, job, reason)
            await self._cleanup(job)
            await self._finish_failed(events, job, reason)
            with contextlib.suppress(Exception):
                await delivery.settle(Ack(sync=True, timeout=5))
            return
        log.warning("ingest job %s attempt %d/%d failed: %s", job.job_id, attempt, self.queue.max_deliver, reason)
        if delivery.last:
            final = f"failed after {attempt} attempts: {reason}"
            with contextlib.suppress(Exception):
                await self.rt.db.run_grouped(self._fail_if_present, job, final, attempt)
            await self._cleanup(job)
            await self._finish_failed(events, job, final)
            with contextlib.suppress(Exception):
                await delivery.settle(Term())
            self.failed += 1
            return
        with contextlib.suppress(Exception):
            await self.rt.db.run_grouped(jobs.note_retry, job.job_id, attempt, f"attempt {attempt}: {reason}")
        with contextlib.suppress(Exception):
            await events.emit(StatusEvent(task_id=job.job_id, status="retrying", error=reason))
            await events.flush()
        with contextlib.suppress(Exception):
            await delivery.settle(Nak(delay=REDELIVERY.delay(attempt - 1)))

    async def _ack(self, delivery: Delivery) -> None:
        # Not a synchronous ack: a lost ack only means a redelivery, which finds the job done and
        # acks again, so waiting for the server's confirmation of each would buy nothing.
        try:
            await delivery.settle(Ack())
        except Exception:
            log.warning("ack not sent; a redelivery will be a no-op")

    @staticmethod
    def _fail_if_present(conn: Any, job: IngestJob, reason: str, attempts: int | None = None) -> None:
        row = jobs.get_job(conn, job.job_id)
        if row is not None and row.status not in ("done", "failed"):
            jobs.fail(conn, job.job_id, job.document_id, reason, attempts)

    async def _finish_failed(self, events: EventPublisher, job: IngestJob, reason: str) -> None:
        with contextlib.suppress(Exception):
            await events.emit(
                DoneEvent(task_id=job.job_id, status="failed", document_id=job.document_id, chunks=0, error=reason)
            )
            await events.flush()

    async def _cleanup(self, job: IngestJob) -> None:
        if job.content_ref:
            bucket = await objects.uploads(self.bus)
            await objects.delete_quietly(bucket, job.content_ref)
            await objects.delete_quietly(bucket, f"{job.content_ref}.parsed.json")

    async def _on_exhausted(self, data: bytes, deliveries: int) -> None:
        """Every delivery of a job failed: its last one crashed, or each ended without an answer
        (the worker died or hung each time). Raising leaves it to be tried again."""
        try:
            job = IngestJob.from_bytes(data)
        except (ValueError, ValidationError) as exc:
            log.warning("an exhausted ingest message is unreadable (%s); removing it", exc)
            return
        attempts = deliveries or self.queue.max_deliver
        reason = f"redelivery exhausted: no worker finished the job in {attempts} attempts"
        log.warning("ingest job %s: %s", job.job_id, reason)
        await self.rt.db.run_grouped(self._fail_if_present, job, reason)
        events = EventPublisher(self.bus, job.job_id, start_n=await last_event_n(self.bus, job.job_id))
        await self._cleanup(job)
        await self._finish_failed(events, job, reason)
