"""Completion callbacks of chat and `/lg` runs: their payloads are fixed by the conversation
queue, in the transaction that records the run's end (its answer written, so the payload can
carry it, and before a stateless `/lg` run's thread is deleted), then queued once committed on
the callbacks work queue, where `callback_worker` delivers them as it does a task's.

What ends a run: a chat run ends when it reaches an ended state. An `/lg` run also ends when it
stops at an approval, as LangGraph's own server calls a run's webhook when the run returns at an
interrupt (its resume is a new run there, with a webhook of its own: here the same run goes on,
and a resume that names a `webhook` owes one more callback, numbered `run` + 1).

The payload's shape is the kind's (`Builder`): `chat` is built here, `lg` by the LangGraph
protocol (protocols/langgraph/webhook.py), handed in by the app."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic_core import to_jsonable_python
from sqlmodel import Session, col, select

from services.gateway.chat import messages
from services.gateway.chat import runs as chat_runs
from services.gateway.chat.answers import RunTrace
from services.gateway.chat.states import RUN_TERMINAL
from services.gateway.chat.tables import ChatRun
from services.gateway.db import Database
from services.gateway.tables import aware, now
from services.gateway.triggers.callbacks import queue_delivery
from services.gateway.triggers.tables import CallbackDelivery
from shared.bus import Bus

# The payload of a run's callback to a URL; `trace`: the run's event log summed up (None at an approval wait).
Builder = Callable[[Session, ChatRun, RunTrace | None, str], dict[str, Any]]
WAITING = "awaiting_approval"


def chat_payload(session: Session, run: ChatRun, trace: RunTrace | None, url: str) -> dict[str, Any]:
    """Standard Webhooks' `{type, timestamp, data}`: the run as `GET /runs/{id}` shows it and its
    messages (the question, then the answer as written: the run's truth)."""
    data = {**chat_runs.view(session, run), "messages": [messages.view(m) for m in messages.of_run(session, run.id)]}
    if trace is not None and trace.usage is not None:
        data["usage"] = trace.usage
    ended = aware(run.ended_at) or now()
    return {"type": f"run.{run.state}", "timestamp": ended.isoformat(), "data": to_jsonable_python(data)}


def _unsent(session: Session, run_ids: list[str]) -> list[str]:
    """The runs' fixed callbacks not attempted yet. One attempted already is on the queue (being
    retried): publishing it again after the stream's dedupe window would start a second chain."""
    return list(session.exec(select(CallbackDelivery.id).where(col(CallbackDelivery.task_id).in_(run_ids),
                                                               CallbackDelivery.kind != "task",
                                                               CallbackDelivery.status == "pending",
                                                               CallbackDelivery.attempts == 0)))


class RunCallbacks:
    """The conversation queue's `RunEnds`: fixes the callbacks a run's end owes, then queues them."""

    def __init__(self, bus: Bus, db: Database, builders: Mapping[str, Builder]) -> None:
        self.bus = bus
        self.db = db
        self.builders = {"chat": chat_payload, **builders}
        self.queued = 0

    def fix(self, session: Session, run: ChatRun, trace: RunTrace | None) -> None:
        ended = run.state in RUN_TERMINAL
        if not ended and run.state != WAITING:
            return
        rows = session.exec(select(CallbackDelivery).where(CallbackDelivery.task_id == run.id,
                                                           CallbackDelivery.kind != "task",
                                                           CallbackDelivery.status == "waiting"))
        for row in rows:
            if not ended and row.kind != "lg":
                continue  # a chat run waiting for its approval has not ended
            row.status, row.payload = "pending", self.builders[row.kind](session, run, trace, row.url)
            row.ended_at = row.next_attempt_at = row.updated_at = now()
            session.add(row)

    async def queue(self, run_ids: list[str]) -> None:
        """Each fixed, unsent callback of these runs on the work queue (again after a gateway died
        between the commit and the publish: the message id makes a second publish a no-op)."""
        for delivery_id in await self.db.run(_unsent, run_ids):
            await queue_delivery(self.bus, delivery_id)
            self.queued += 1
