"""The completion callbacks' delivery log as the API shows it (`/api/v1/callbacks`), a chat or
`/lg` run's entry in it (written with the run), and a redelivery on demand: a delivered or failed
callback is made `pending` again and queued anew."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.tables import now
from services.gateway.triggers.tables import CallbackDelivery
from shared.bus import Bus


def view(row: CallbackDelivery) -> dict[str, Any]:
    return {
        "id": row.id, "kind": row.kind, "task_id": row.task_id, "run": row.run, "url": row.url, "status": row.status,
        "attempts": row.attempts, "last_status_code": row.last_status_code, "last_error": row.last_error,
        "next_attempt_at": row.next_attempt_at, "created_at": row.created_at, "ended_at": row.ended_at,
        "delivered_at": row.delivered_at, "payload": row.payload,
    }  # fmt: skip


def owe(session: Session, run_id: str, user_id: str, url: str, kind: str) -> str:
    """A chat (`kind: chat`) or `/lg` (`lg`) run's callback, written in the transaction that
    writes the run (or the `/lg` resume that asks for one): it never ends owing an unknown
    callback. `run` numbers the run's ends: a resumed `/lg` run ends again."""
    last = session.exec(select(func.max(CallbackDelivery.run)).where(CallbackDelivery.task_id == run_id)).one()
    row = CallbackDelivery(id=new_id("cb"), task_id=run_id, run=0 if last is None else last + 1,
                           user_id=user_id, url=url, kind=kind)
    session.add(row)
    return row.id


def orphan(session: Session, run_ids: list[str], reason: str) -> None:
    """The callbacks still owed by runs deleted before they ended (their conversation went):
    nothing is left to report, so they fail, with why, rather than wait for ever."""
    if not run_ids:
        return
    for row in session.exec(select(CallbackDelivery).where(col(CallbackDelivery.task_id).in_(run_ids),
                                                           CallbackDelivery.kind != "task",
                                                           CallbackDelivery.status == "waiting")):
        row.status, row.last_error, row.updated_at = "failed", reason, now()
        session.add(row)


def drop_waiting(session: Session, delivery_id: str) -> None:
    """A callback owed by a request that was then refused (an `/lg` resume whose approval failed)."""
    row = session.get(CallbackDelivery, delivery_id)
    if row is not None and row.status == "waiting":
        session.delete(row)


def load_owned(session: Session, user: Principal, delivery_id: str) -> CallbackDelivery:
    row = session.get(CallbackDelivery, delivery_id)
    if row is None or not user.can_see(row.user_id):
        raise ApiProblem(404, "Not Found", f"No callback delivery {delivery_id!r}.")
    return row


def list_deliveries(session: Session, user: Principal, task_id: str | None, status: str | None,
                    limit: int) -> list[dict[str, Any]]:  # fmt: skip
    query = select(CallbackDelivery).order_by(col(CallbackDelivery.id).desc()).limit(limit)
    if not user.is_admin:
        query = query.where(CallbackDelivery.user_id == user.id)
    if task_id is not None:
        query = query.where(CallbackDelivery.task_id == task_id)
    if status is not None:
        query = query.where(CallbackDelivery.status == status)
    return [view(r) for r in session.exec(query)]


def _reopen(session: Session, user: Principal, delivery_id: str) -> tuple[dict[str, Any], int]:
    row = load_owned(session, user, delivery_id)
    if row.status == "waiting":
        whose = "Task" if row.kind == "task" else "Run"
        raise ApiProblem(409, "Conflict", f"{whose} {row.task_id} has not ended: there is nothing to deliver yet.")
    row.status, row.next_attempt_at, row.updated_at = "pending", now(), now()
    row.ended_at = now()  # the retry window starts again from this request
    session.add(row)
    session.flush()
    return view(row), row.attempts


async def redeliver(db: Any, bus: Bus, user: Principal, delivery_id: str) -> dict[str, Any]:
    out, attempts = await db.run(_reopen, user, delivery_id)
    # A message id of its own: the first message's id is still remembered by the stream's dedupe.
    await bus.js_publish_raw(bus.subjects.callbacks_deliver, delivery_id.encode(),
                             msg_id=f"callback:{delivery_id}:again:{attempts}:{now().timestamp()}")
    return out
