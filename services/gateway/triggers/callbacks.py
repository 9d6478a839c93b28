"""Completion callbacks, from a task's end to a delivery message. A task that named a webhook URL
has a delivery row from its submission (`waiting`). The `callback-ends` consumer reads the task
ends (`done` on the status channel); for each task that owes a callback (a chat or `/lg` run's
is run_callbacks.py's) it fixes the payload in the row (`pending`), commits, publishes a
delivery message on the callbacks work queue (message id = the delivery's id: a second publish
is dropped) and only then acks the end. A gateway that dies anywhere in between leaves the end
unacked: it comes back, to this gateway or another, and the same steps are taken again,
idempotently. The delivery itself is `callback_worker`'s."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from typing import Any

from sqlmodel import Session, col, select

from services.gateway.db import Database
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.runs.consumer import EventConsumer
from services.gateway.tables import now
from services.gateway.triggers.signing import PREFIX
from services.gateway.triggers.tables import CallbackDelivery
from services.gateway.triggers.targets import TargetRefused, check_target
from shared.bus import Bus
from shared.contract.events import AnyEvent, DoneEvent
from shared.settings import GatewaySettings

log = logging.getLogger("agentix.gateway.callbacks")


class DeliveryRef:
    """What a delivery message carries: the delivery's id (everything else is in its row)."""

    @staticmethod
    def encode(delivery_id: str) -> bytes:
        return delivery_id.encode()

    @staticmethod
    def decode(data: bytes) -> str:
        return data.decode()


def callback_secret(settings: GatewaySettings, user_id: str) -> str:
    """The Standard Webhooks secret the callbacks of a user's tasks are signed with: derived from
    the deployment's token secret, so every gateway replica signs alike and nothing is stored."""
    root = settings.persistent_secret("jwt_secret").encode()
    key = hmac.new(root, f"agentix-callbacks:{user_id}".encode(), hashlib.sha256).digest()[:24]
    return PREFIX + base64.b64encode(key).decode()


async def check_webhook(settings: GatewaySettings, url: str | None, field: str = "webhook") -> None:
    """Refuse a callback URL the deployment may not call (SSRF), as a 422 naming the field."""
    if url is None:
        return
    try:
        await check_target(url, settings.callback_allow_hosts, settings.callback_allow_private)
    except TargetRefused as exc:
        raise ApiProblem(422, "Invalid request", f"`{field}`: {exc.reason}",
                         errors=[{"code": "callback_target", "message": exc.reason, "field": field}]) from None


def payload(event: DoneEvent, task_id: str) -> dict[str, Any]:
    """The body POSTed (Standard Webhooks' `{type, timestamp, data}`): what the task's `done` said."""
    data: dict[str, Any] = {"task_id": task_id, "status": event.status, "output": event.output,
                            "error": event.error, "code": event.code}  # fmt: skip
    if event.usage is not None:
        data["usage"] = event.usage.model_dump(mode="json")
    if event.retry:
        data["retry"] = event.retry
    ended = event.ts or now()
    return {"type": f"task.{event.status}", "timestamp": ended.isoformat(), "data": data}


def _owed(session: Session, ends: list[DoneEvent]) -> list[str]:
    """Fix the payload of each end that owes a callback; the ids of the deliveries to queue
    (again, when a previous pass died before acking: queueing twice is harmless)."""
    ids = {e.task_id for e in ends}
    # A chat or `/lg` run's callback is fixed by the conversation queue, once the run's end is
    # recorded (its answer written): not from its task's `done` here (triggers/run_callbacks.py).
    rows = list(session.exec(select(CallbackDelivery).where(col(CallbackDelivery.task_id).in_(ids),
                                                            CallbackDelivery.kind == "task")))
    by_run = {(r.task_id, r.run): r for r in rows}
    by_task = {r.task_id: r for r in sorted(rows, key=lambda r: r.run)}
    queue: list[str] = []
    for end in ends:
        run = end.retry or 0
        row = by_run.get((end.task_id, run))
        if row is None:
            first = by_task.get(end.task_id)
            if first is None:
                continue  # the task named no callback
            # A retried run ends: it owes its own callback, to the same URL.
            row = CallbackDelivery(id=new_id("cb"), task_id=end.task_id, run=run, user_id=first.user_id, url=first.url)
            by_run[(end.task_id, run)] = row
        if row.status == "waiting":
            row.status, row.payload = "pending", payload(end, end.task_id)
            row.ended_at = row.next_attempt_at = row.updated_at = now()
            session.add(row)
        if row.status == "pending":
            queue.append(row.id)
    session.flush()
    return queue


async def queue_delivery(bus: Bus, delivery_id: str) -> None:
    await bus.js_publish_raw(bus.subjects.callbacks_deliver, DeliveryRef.encode(delivery_id),
                             msg_id=f"callback:{delivery_id}")


class CallbackEnds:
    """The `callback-ends` consumer: task ends → delivery messages (at least once)."""

    def __init__(self, bus: Bus, db: Database) -> None:
        self.bus = bus
        self.db = db
        self.queued = 0
        self._consumer = EventConsumer(bus, bus.names.callback_ends_consumer, self.apply, name="callback-ends")

    async def start(self) -> None:
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()

    async def apply(self, events: list[AnyEvent]) -> None:
        ends = [e for e in events if isinstance(e, DoneEvent) and e.document_id is None]
        if not ends:
            return
        for delivery_id in await self.db.run(_owed, ends):
            await queue_delivery(self.bus, delivery_id)
            self.queued += 1
