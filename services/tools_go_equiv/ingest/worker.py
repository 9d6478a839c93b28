"""The ingestion worker: a pull consumer on the `ingest` work queue.

At most `ingest_concurrency` jobs at once (and the consumer's `max_ack_pending` across all
replicas). The lease is renewed every ack_wait/3 while a job runs. A failing job is retried
with backoff; on its last delivery it is marked `failed` with the reason and terminated. A job
whose worker died on every attempt is caught by the MAX_DELIVERIES advisory and marked too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from services.tools_go_equiv import objects
from services.tools_go_equiv.ingest import jobs
from services.tools_go_equiv.ingest.pipeline import IngestError, JobGone, run_job
from services.tools_go_equiv.kb.embed import EmbedderUnavailable
from services.tools_go_equiv.kb.store import DocumentGone
from services.tools_go_equiv.runtime import Runtime
from shared.bus.events import EventPublisher, last_event_n
from shared.bus.tracing import consumer_span
from shared.contract.events import DoneEvent, StatusEvent
from shared.contract.ingest import IngestJob

log = logging.getLogger("agentix.tools_go.ingest")
ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}"


def describe(exc: BaseException) -> str:
    if isinstance(exc, IngestError | EmbedderUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:1000]


class IngestWorker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.bus = rt.bus
        self.concurrency = min(rt.kb.ingest_concurrency, max(1, rt.settings.ingest_max_ack_pending))
        self._tasks: set[asyncio.Task] = set()
        self._loop_task: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self._sub: Any = None
        self._advisories: Any = None
        self.max_deliver = rt.settings.ingest_max_deliver
        self.ack_wait = rt.settings.ingest_ack_wait_s
        self.done = 0
        self.failed = 0

    @property
    def inflight(self) -> int:
        return len(self._tasks)

    async def start(self) -> None:
        names = self.bus.names
        info = await self.bus.js.consumer_info(names.ingest_stream, names.ingest_consumer)
        # The declared consumer is the truth (settings of this process may differ).
        self.max_deliver = info.config.max_deliver or self.max_deliver
        self.ack_wait = info.config.ack_wait or self.ack_wait
        self._sub = await self.bus.js.pull_subscribe_bind(durable=names.ingest_consumer, stream=names.ingest_stream)
        self._advisories = await self.bus.nc.subscribe(
            ADVISORY.format(stream=names.ingest_stream, consumer=names.ingest_consumer),
            queue=f"{self.bus.settings.subject_prefix}-ingest-advisory",
            cb=self._on_exhausted,
        )
        self._loop_task = asyncio.create_task(self._loop(), name="ingest-worker")

    async def _loop(self) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        while not self._stopping.is_set():
            await slots.acquire()
            if self._stopping.is_set():
                slots.release()
                break
            try:
                msgs = await self._sub.fetch(1, timeout=0.5)
            except (NatsTimeout, TimeoutError):
                slots.release()
                continue
            except Exception as exc:  # disconnected: wait for the reconnect
                slots.release()
                log.debug("ingest fetch failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            for msg in msgs:
                task = asyncio.create_task(self._handle(msg))
                self._tasks.add(task)
                task.add_done_callback(lambda t: (self._tasks.discard(t), slots.release()))

    async def _renew(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(max(0.2, self.ack_wait / 3))
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _handle(self, msg: Msg) -> None:
        try:
            job = IngestJob.from_bytes(msg.data)
        except ValidationError as exc:
            log.error("dropping a malformed ingest job: %s", exc)
            await msg.term()
            return
        attempt = msg.metadata.num_delivered or 1
        renew = asyncio.create_task(self._renew(msg))
        # On a first delivery only kb_ingest's `queued` event precedes ours; later, ask the stream.
        start_n = 1 if attempt == 1 else await last_event_n(self.bus, job.job_id)
        events = EventPublisher(self.bus, job.job_id, start_n=start_n)

        async def touch() -> None:
            with contextlib.suppress(Exception):
                await msg.in_progress()

        try:
            with consumer_span("ingest job", msg.headers, **{"agentix.job_id": job.job_id}):
                chunks = await run_job(self.rt, job, attempt, events, touch)
            # The upload is no longer needed (a redelivery finds the job done without it).
            await self._cleanup(job)
            await events.emit(DoneEvent(task_id=job.job_id, status="done", document_id=job.document_id, chunks=chunks))
            await events.flush()
            await self._ack(msg)
            self.done += 1
        except (DocumentGone, JobGone):
            reason = "the document or its knowledge base was deleted during ingestion"
            with contextlib.suppress(Exception):
                await self.rt.db.run(self._fail_if_present, job, reason)
            await self._cleanup(job)
            await self._finish_failed(events, job, reason)
            await self._ack(msg)
        except asyncio.CancelledError:
            # Shutting down mid-job: hand it straight back to the queue.
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Exception as exc:
            reason = describe(exc)
            log.warning("ingest job %s attempt %d/%d failed: %s", job.job_id, attempt, self.max_deliver, reason)
            if self.max_deliver > 0 and attempt >= self.max_deliver:
                final = f"failed after {attempt} attempts: {reason}"
                with contextlib.suppress(Exception):
                    await self.rt.db.run(self._fail_if_present, job, final, attempt)
                await self._cleanup(job)
                await self._finish_failed(events, job, final)
                await msg.term()
                self.failed += 1
            else:
                with contextlib.suppress(Exception):
                    await self.rt.db.run(jobs.note_retry, job.job_id, attempt, f"attempt {attempt}: {reason}")
                with contextlib.suppress(Exception):
                    await events.emit(StatusEvent(task_id=job.job_id, status="retrying", error=reason))
                    await events.flush()
                await msg.nak(delay=min(2.0 ** (attempt - 1), 30.0))
        finally:
            renew.cancel()

    async def _ack(self, msg: Msg) -> None:
        try:
            await msg.ack_sync(timeout=5)
        except Exception:  # the redelivery will find the job done and ack again
            log.warning("ack not confirmed; a redelivery will be a no-op")

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

    async def _on_exhausted(self, msg: Msg) -> None:
        """Every delivery ended without an answer (the worker died or hung each time)."""
        try:
            seq = int(json.loads(msg.data)["stream_seq"])
            stream = self.bus.names.ingest_stream
            raw = await self.bus.js.get_msg(stream, seq)
            job = IngestJob.from_bytes(raw.data or b"")
        except (KeyError, ValueError, ValidationError, NotFoundError) as exc:
            log.debug("max-deliveries advisory not actionable: %s", exc)
            return
        reason = f"redelivery exhausted: no worker finished the job in {self.max_deliver} attempts"
        log.warning("ingest job %s: %s", job.job_id, reason)
        with contextlib.suppress(Exception):
            await self.rt.db.run(self._fail_if_present, job, reason)
        events = EventPublisher(self.bus, job.job_id, start_n=await last_event_n(self.bus, job.job_id))
        await self._cleanup(job)
        await self._finish_failed(events, job, reason)
        with contextlib.suppress(Exception):
            await self.bus.js.delete_msg(stream, seq)

    async def stop(self, timeout_s: float = 25.0) -> None:
        """Stop fetching, let running jobs finish, hand back (nak) the ones that do not."""
        self._stopping.set()
        if self._loop_task:
            await asyncio.wait([self._loop_task], timeout=3)
            self._loop_task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        for sub in (self._advisories, self._sub):
            with contextlib.suppress(Exception):
                if sub is not None:
                    await sub.unsubscribe()
