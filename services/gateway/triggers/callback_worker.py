"""Delivering completion callbacks: the gateways' workers on the callbacks work queue. Each
attempt POSTs the payload fixed at the task's end, signed with the Standard Webhooks scheme
(`webhook-id` = the delivery's id, the same on every attempt, so a receiver recognises a
repeat), and records the attempt in the delivery log. A 2xx answer delivers it; anything else
(an error status, a timeout, a refused connection) is retried with a doubling backoff until
`callback_max_age_s` after the task's end, then the delivery is `failed`. The message's lease is
renewed while an attempt runs; a gateway that dies mid-attempt leaves it unanswered, and another
gateway (or this one, restarted) takes it once the lease lapses: nothing is lost."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import update
from sqlmodel import Session, col

from services.gateway.db import Database
from services.gateway.tables import aware, now
from services.gateway.triggers.callbacks import DeliveryRef, callback_secret
from services.gateway.triggers.signing import signed_headers
from services.gateway.triggers.tables import CallbackDelivery
from services.gateway.triggers.targets import TargetRefused, check_target
from shared.backoff import Backoff
from shared.bus import Bus
from shared.bus.delivery import Ack, Delivery, Nak, Verdict
from shared.bus.workqueue import WorkQueue
from shared.settings import GatewaySettings

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("agentix.gateway.callbacks")
CONCURRENCY = 32
CAPACITY = 256
USER_AGENT = "Agentix-Callbacks/1"


def _load(session: Session, delivery_id: str) -> CallbackDelivery | None:
    return session.get(CallbackDelivery, delivery_id)


def _record(session: Session, delivery_id: str, **values: object) -> None:
    """One attempt's outcome, written only while the delivery is still `pending` (a delivery
    another worker finished, or one given up, keeps its outcome)."""
    stmt = (update(CallbackDelivery)
            .where(col(CallbackDelivery.id) == delivery_id, col(CallbackDelivery.status) == "pending")
            .values(updated_at=now(), **values))  # fmt: skip
    session.execute(stmt)


def _count_attempt(session: Session, delivery_id: str) -> None:
    session.execute(update(CallbackDelivery).where(col(CallbackDelivery.id) == delivery_id)
                    .values(attempts=CallbackDelivery.attempts + 1))  # fmt: skip


class CallbackWorker:
    def __init__(self, bus: Bus, db: Database, settings: GatewaySettings) -> None:
        self.bus = bus
        self.db = db
        self.settings = settings
        self.delivered = 0
        self.backoff = Backoff(settings.callback_retry_first_s,
                               max(settings.callback_retry_max_s, settings.callback_retry_first_s), jitter=0.2)
        self._client: httpx.AsyncClient | None = None
        self._queue = WorkQueue(
            bus, bus.names.callbacks_stream, bus.names.callbacks_consumer,
            on_exhausted=self._exhausted, handle=self.handle, concurrency=CONCURRENCY, capacity=CAPACITY,
            ack_wait_s=settings.callback_ack_wait_s, max_deliver=-1,
        )

    async def start(self) -> None:
        await self._queue.start()

    def _http(self) -> httpx.AsyncClient:
        """The HTTP client, made at the first delivery: a gateway that never delivers a callback
        does without httpx in memory (docs/PERFORMANCE.md, "Memory")."""
        if self._client is None:
            import httpx

            # Redirects are not followed: a callback goes to the URL that was checked, nowhere else.
            self._client = httpx.AsyncClient(timeout=self.settings.callback_timeout_s, follow_redirects=False,
                                             headers={"user-agent": USER_AGENT})
        return self._client

    async def stop(self) -> None:
        try:
            await self._queue.drain(grace_s=self.settings.callback_timeout_s)
        finally:
            if self._client is not None:
                await self._client.aclose()

    async def _exhausted(self, data: bytes, deliveries: int) -> None:
        # max_deliver is unbounded: only reached if an operator bounded the consumer.
        await self.db.run(_record, DeliveryRef.decode(data), status="failed",
                          last_error=f"the work queue gave up after {deliveries} deliveries")

    async def handle(self, delivery: Delivery) -> Verdict | None:
        delivery_id = DeliveryRef.decode(delivery.data)
        row = await self.db.run(_load, delivery_id)
        if row is None or row.status != "pending" or row.payload is None:
            return Ack()  # delivered, given up or unknown: nothing owed
        ended = aware(row.ended_at) or now()
        give_up_at = ended + timedelta(seconds=self.settings.callback_max_age_s)
        error, code = await self._attempt(row)
        await self.db.run(_count_attempt, delivery_id)
        if error is None:
            await self.db.run(_record, delivery_id, status="delivered", delivered_at=now(), last_status_code=code,
                              last_error=None, next_attempt_at=None)
            self.delivered += 1
            return Ack()
        attempts = row.attempts + 1
        delay = self.backoff.delay(attempts - 1)
        if code == -1 or now() + timedelta(seconds=delay) > give_up_at:
            await self.db.run(_record, delivery_id, status="failed", last_status_code=code if code > 0 else None,
                              last_error=error, next_attempt_at=None)
            log.warning("callback %s of %s %s failed for good: %s", delivery_id, row.kind, row.task_id, error)
            return Ack()
        await self.db.run(_record, delivery_id, last_status_code=code if code > 0 else None, last_error=error,
                          next_attempt_at=now() + timedelta(seconds=delay))
        return Nak(delay=delay)

    async def _attempt(self, row: CallbackDelivery) -> tuple[str | None, int]:
        """(error or None, HTTP status; 0: no answer, -1: the target is refused for good)."""
        client = self._http()
        try:  # checked again at each attempt: a name may have come to point inside since
            await check_target(row.url, self.settings.callback_allow_hosts, self.settings.callback_allow_private)
        except TargetRefused as exc:
            return exc.reason, -1
        sent = row.payload
        if row.kind == "lg" and sent is not None:  # LangGraph's run webhook says when this attempt was sent
            sent = {**sent, "webhook_sent_at": now().isoformat()}
        body = json.dumps(sent, separators=(",", ":")).encode()
        headers = signed_headers(callback_secret(self.settings, row.user_id), row.id, int(time.time()), body)
        headers["content-type"] = "application/json"
        import httpx

        try:
            response = await client.post(row.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 0
        if 200 <= response.status_code < 300:
            return None, response.status_code
        return f"the receiver answered {response.status_code}", response.status_code
