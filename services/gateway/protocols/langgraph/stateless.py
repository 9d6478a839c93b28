"""Runs not started on a given thread: background stateless runs (`POST /runs`, `/runs/batch`)
and cancelling many runs at once (`POST /runs/cancel`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import command, runs, threads
from shared.bus import Bus

MAX_BATCH = 100
_PENDING = ("queued",)


class CancelMany(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thread_id: str | None = Field(default=None, max_length=64)
    run_ids: list[str] | None = Field(default=None, max_length=1000)
    status: Literal["pending", "running", "all"] | None = None


def to_cancel(session: Session, user: Principal, body: CancelMany) -> list[tuple[str, str]]:
    """The (thread, run) pairs the body names that have not ended: by ids (in the thread, if
    given), or every going run of the thread or of the caller with the status."""
    if not body.run_ids and body.status is None:
        raise ApiProblem(422, "Invalid request", "Name the runs: `run_ids`, or `status` (with `thread_id` or not).")
    rows = select(ChatRun).where(col(ChatRun.ended_at).is_(None))
    if body.thread_id is not None:
        threads.load(session, user, body.thread_id)
        rows = rows.where(ChatRun.conversation_id == body.thread_id)
    if body.run_ids:
        rows = rows.where(col(ChatRun.id).in_(body.run_ids))
    if body.status == "pending":
        rows = rows.where(col(ChatRun.state).in_(_PENDING))
    elif body.status == "running":
        rows = rows.where(col(ChatRun.state).not_in(_PENDING))
    found = []
    for run in session.exec(rows):
        conversation = session.get(Conversation, run.conversation_id)
        if conversation is not None and user.can_see(conversation.user_id):
            found.append((run.conversation_id, run.id))
    return found


async def cancel_many(db: Database, bus: Bus, user: Principal, body: CancelMany, action: str) -> None:
    for thread_id, run_id in await db.run(to_cancel, user, body):
        try:
            await runs.cancel(db, bus, user, thread_id, run_id, action)
        except ApiProblem as exc:
            if exc.status != 409:  # ended meanwhile
                raise


def check_bodies(bodies: list[runs.RunCreate]) -> None:
    """Every body of a batch checked — its `command`, and what its run asks — before any of its
    runs starts (a refusal names the body: `[i].command.…`, `[i].input.…`), so that a bad one in
    a later body leaves no earlier run started."""
    for i, body in enumerate(bodies):
        try:
            asked = command.read(body)
            if not asked.resume and not asked.end:
                runs.asked_by(body, asked)
        except ApiProblem as exc:
            for error in exc.errors or []:
                error["field"] = f"[{i}].{error.get('field', 'command')}"
            raise


async def start_background(state: Any, db: Database, bus: Bus, user: Principal, body: runs.RunCreate,
                           guard: runs.Guard) -> dict[str, Any]:
    """A stateless run in the background: its thread goes once it has ended (unless `keep`)."""
    started, done = await runs.start_stateless(state, db, bus, user, body, guard)
    done()
    return await db.run(runs.view, started.run)
