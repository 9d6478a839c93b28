"""The ingestion worker: a pull consumer on the `ingest` work queue.

Up to the consumer's `max_ack_pending` jobs are in flight (a bound the server also enforces
across replicas), fetched as `ingest_concurrency` batches. A batch is parsed concurrently, its
small documents are embedded together and committed in one transaction, and each job is acked
only after the commit that made it durable. Leases are renewed every ack_wait/3 while a batch
runs. A failing job is retried with backoff; on its last delivery it is marked `failed` with the
reason and terminated. A job whose worker died on every attempt is caught by the
MAX_DELIVERIES advisory (kept in the dead-letter stream) and marked too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from pydantic import ValidationError

from services.tools_go_equiv import objects
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.ingest.pipeline import IngestError, JobGone, Work, run_batch
from services.tools_go_equiv.kb.embed import EmbedderUnavailable
from services.tools_go_equiv.kb.store import DocumentGone
from services.tools_go_equiv.runtime import Runtime
from shared.aio import cancel_and_wait
from shared.bus.dead_letters import DeadLetters
from shared.bus.events import EventPublisher, last_event_n
from shared.bus.tracing import consumer_span, extract_context
from shared.contract.events import DoneEvent, StatusEvent
from shared.contract.ingest import IngestJob

log = logging.getLogger("agentix.tools_go.ingest")
tracer = trace.get_tracer("agentix.tools_go.ingest")
FETCH_WAIT_S = 0.5
MAX_BATCH = 64  # jobs per batch (and per transaction) at most
Pending = dict[int, Msg]  # the messages of a batch not yet acked, nak'ed or terminated, by id()


def describe(exc: BaseException) -> str:
    if isinstance(exc, IngestError | EmbedderUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:1000]


class IngestWorker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.bus = rt.bus
        self.max_deliver = rt.settings.ingest_max_deliver
        self.ack_wait = rt.settings.ingest_ack_wait_s
        self.concurrency = rt.kb.ingest_concurrency
        self.capacity = max(1, rt.settings.ingest_max_ack_pending)
        self._size_batches()
        self._inflight = 0  # jobs fetched and not yet acked, nak'ed or terminated
        self._freed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._loop_task: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self._sub: Any = None
        self._dead: DeadLetters | None = None
        self.done = 0
        self.failed = 0

    @property
    def inflight(self) -> int:
        return self._inflight

    def _size_batches(self) -> None:
        """`ingest_concurrency` batches fill the capacity: while one is being embedded and
        written, the next is being parsed."""
        self.batch = max(1, min(MAX_BATCH, -(-self.capacity // self.concurrency)))

    async def start(self) -> None:
        names = self.bus.names
        info = await self.bus.js.consumer_info(names.ingest_stream, names.ingest_consumer)
        # The declared consumer is the truth (settings of this process may differ).
        self.max_deliver = info.config.max_deliver or self.max_deliver
        self.ack_wait = info.config.ack_wait or self.ack_wait
        if info.config.max_ack_pending and info.config.max_ack_pending > 0:
            self.capacity = info.config.max_ack_pending
            self._size_batches()
        self._sub = await self.bus.js.pull_subscribe_bind(durable=names.ingest_consumer, stream=names.ingest_stream)
        self._dead = DeadLetters(self.bus, names.ingest_consumer, self._on_exhausted)
        await self._dead.start()
        self._loop_task = asyncio.create_task(self._loop(), name="ingest-worker")

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            # At most `ingest_concurrency` batches: while they run, jobs queue up, and the next
            # fetch takes them together (busy: large batches; idle: a job is started at once).
            if self._inflight >= self.capacity or len(self._tasks) >= self.concurrency:
                self._freed.clear()
                await self._freed.wait()
                continue
            # Asking for more than the consumer would hand out makes a fetch wait its full time.
            want = min(self.batch, self.capacity - self._inflight)
            try:
                msgs = await self._sub.fetch(want, timeout=FETCH_WAIT_S)
            except (NatsTimeout, TimeoutError):
                continue
            except Exception as exc:  # disconnected: wait for the reconnect
                log.debug("ingest fetch failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            if not msgs:
                continue
            self._inflight += len(msgs)
            task = asyncio.create_task(self._run(msgs))
            self._tasks.add(task)
            task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._freed.set()

    def _release(self, pending: Pending, msg: Msg) -> None:
        if pending.pop(id(msg), None) is not None:
            self._inflight -= 1
            self._freed.set()

    async def _renew(self, pending: Pending) -> None:
        while True:
            await asyncio.sleep(max(0.2, self.ack_wait / 3))
            for msg in list(pending.values()):
                with contextlib.suppress(Exception):
                    await msg.in_progress()

    async def _run(self, msgs: list[Msg]) -> None:
        pending: Pending = {id(m): m for m in msgs}
        renew = asyncio.create_task(self._renew(pending))
        try:
            pairs = await self._accept(msgs, pending)
            unsettled = {id(w): m for w, m in pairs}

            async def settle(works: list[Work]) -> None:
                ready = [(w, unsettled.pop(id(w))) for w in works if id(w) in unsettled]
                await self._settle(ready, pending)

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
        except asyncio.CancelledError:
            # Shutting down mid-batch: hand the unsettled jobs straight back to the queue.
            for msg in list(pending.values()):
                with contextlib.suppress(Exception):
                    await msg.nak()
            raise
        except Exception:  # e.g. NATS went away while settling: let the jobs come back soon
            log.exception("ingest batch of %d jobs failed", len(msgs))
            for msg in list(pending.values()):
                with contextlib.suppress(Exception):
                    await msg.nak(delay=1.0)
        finally:
            renew.cancel()
            for msg in list(pending.values()):
                self._release(pending, msg)

    async def _accept(self, msgs: list[Msg], pending: Pending) -> list[tuple[Work, Msg]]:
        pairs: list[tuple[Work, Msg]] = []
        for msg in msgs:
            try:
                job = IngestJob.from_bytes(msg.data)
            except ValidationError as exc:
                log.error("dropping a malformed ingest job: %s", exc)
                with contextlib.suppress(Exception):
                    await msg.term()
                self._release(pending, msg)
                continue
            attempt = msg.metadata.num_delivered or 1

            async def touch(m: Msg = msg) -> None:
                with contextlib.suppress(Exception):
                    await m.in_progress()

            pairs.append((Work(job, attempt, EventPublisher(self.bus, job.job_id, start_n=1), touch), msg))
        # On a first delivery only kb_ingest's `queued` event precedes ours; later, ask the stream.
        again = [w for w, _ in pairs if w.attempt > 1]
        numbers = await asyncio.gather(*(last_event_n(self.bus, w.job.job_id) for w in again))
        for w, n in zip(again, numbers, strict=True):
            w.events.n = n
        return pairs

    @contextlib.contextmanager
    def _span(self, pairs: list[tuple[Work, Msg]]) -> Iterator[None]:
        """A lone job continues its uploader's trace; a batch links to each of theirs."""
        if len(pairs) == 1:
            work, msg = pairs[0]
            with consumer_span("ingest job", msg.headers, **{"agentix.job_id": work.job.job_id}):
                yield
            return
        contexts = [trace.get_current_span(extract_context(m.headers)).get_span_context() for _, m in pairs]
        links = [Link(c) for c in contexts if c.is_valid]
        with tracer.start_as_current_span(
            "ingest batch", kind=SpanKind.CONSUMER, links=links, attributes={"agentix.jobs": len(pairs)}
        ):
            yield

    async def _settle(self, pairs: list[tuple[Work, Msg]], pending: Pending) -> None:
        """Indexed jobs: `done` event, then ack, all together. The others one by one."""
        indexed = [(w, m) for w, m in pairs if isinstance(w.outcome, int)]
        announced = await asyncio.gather(*(self._announce(w) for w, _ in indexed), return_exceptions=True)
        acks = []
        for (w, msg), error in zip(indexed, announced, strict=True):
            if isinstance(error, BaseException):  # the `done` event may be lost: do it again
                log.warning("ingest job %s: done event not stored (%s); redelivering", w.job.job_id, error)
                with contextlib.suppress(Exception):
                    await msg.nak()
                self._release(pending, msg)
            else:
                acks.append(msg)
        await asyncio.gather(*(self._ack(msg, pending) for msg in acks))
        self.done += len(acks)
        for w, msg in pairs:
            if not isinstance(w.outcome, int):
                await self._failed(w, msg)
                self._release(pending, msg)

    async def _announce(self, w: Work) -> None:
        await self._cleanup(w.job)  # the upload is no longer needed (a redelivery finds the job done)
        job, chunks = w.job, int(w.outcome)  # type: ignore[arg-type]
        await w.events.emit(DoneEvent(task_id=job.job_id, status="done", document_id=job.document_id, chunks=chunks))
        await w.events.flush()

    async def _failed(self, w: Work, msg: Msg) -> None:
        job, attempt, events = w.job, w.attempt, w.events
        exc = w.outcome if isinstance(w.outcome, BaseException) else RuntimeError("no outcome")
        if isinstance(exc, DocumentGone | JobGone):
            reason = "the document or its knowledge base was deleted during ingestion"
            with contextlib.suppress(Exception):
                await self.rt.db.run(self._fail_if_present, job, reason)
            await self._cleanup(job)
            await self._finish_failed(events, job, reason)
            with contextlib.suppress(Exception):
                await msg.ack_sync(timeout=5)
            return
        reason = describe(exc)
        log.warning("ingest job %s attempt %d/%d failed: %s", job.job_id, attempt, self.max_deliver, reason)
        if self.max_deliver > 0 and attempt >= self.max_deliver:
            final = f"failed after {attempt} attempts: {reason}"
            with contextlib.suppress(Exception):
                await self.rt.db.run(self._fail_if_present, job, final, attempt)
            await self._cleanup(job)
            await self._finish_failed(events, job, final)
            with contextlib.suppress(Exception):
                await msg.term()
            self.failed += 1
            return
        with contextlib.suppress(Exception):
            await self.rt.db.run(jobs.note_retry, job.job_id, attempt, f"attempt {attempt}: {reason}")
        with contextlib.suppress(Exception):
            await events.emit(StatusEvent(task_id=job.job_id, status="retrying", error=reason))
            await events.flush()
        with contextlib.suppress(Exception):
            await msg.nak(delay=min(2.0 ** (attempt - 1), 30.0))

    async def _ack(self, msg: Msg, pending: Pending) -> None:
        # Not `ack_sync`: a lost ack only means a redelivery, which finds the job done and acks
        # again, so waiting for the server's confirmation of each would buy nothing.
        try:
            await msg.ack()
        except Exception:
            log.warning("ack not sent; a redelivery will be a no-op")
        self._release(pending, msg)

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

    async def _on_exhausted(self, seq: int, deliveries: int) -> None:
        """Every delivery of the job at `seq` ended without an answer (the worker died or hung
        each time); raising leaves the dead letter to be tried again."""
        stream = self.bus.names.ingest_stream
        try:
            raw = await self.bus.js.get_msg(stream, seq)
        except NotFoundError:  # already handled
            return
        try:
            job = IngestJob.from_bytes(raw.data or b"")
        except (ValueError, ValidationError) as exc:
            log.warning("an exhausted ingest message is unreadable (%s); removing it", exc)
        else:
            reason = f"redelivery exhausted: no worker finished the job in {deliveries or self.max_deliver} attempts"
            log.warning("ingest job %s: %s", job.job_id, reason)
            await self.rt.db.run(self._fail_if_present, job, reason)
            events = EventPublisher(self.bus, job.job_id, start_n=await last_event_n(self.bus, job.job_id))
            await self._cleanup(job)
            await self._finish_failed(events, job, reason)
        with contextlib.suppress(NotFoundError):
            await self.bus.js.delete_msg(stream, seq)

    async def stop(self, timeout_s: float = 25.0) -> None:
        """Stop fetching, let running batches finish, hand back (nak) the jobs of those that do not."""
        self._stopping.set()
        self._freed.set()
        if self._loop_task:
            await asyncio.wait([self._loop_task], timeout=3)
            await cancel_and_wait(self._loop_task)
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        if self._dead is not None:
            await self._dead.stop()
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
