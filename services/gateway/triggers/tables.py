"""The triggers' tables. Schedules (migration 0011): each schedule (what it starts, when, and its
policies) and its fire history — one row per fire, keyed by the fire's own id, so a fire delivered
twice is decided once. Hooks (migration 0014): inbound hooks and the completion callbacks'
delivery log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, Text, UniqueConstraint
from sqlmodel import Field

from services.gateway.tables import GatewayModel, _json, _stamp, _ts


class Schedule(GatewayModel, table=True):
    __tablename__ = "schedules"

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)  # the creator: each fire's task is theirs
    name: str | None = Field(default=None, max_length=200)
    workflow_id: str = Field(max_length=64)
    input: dict[str, Any] = _json(dict)
    cron: str | None = Field(default=None, max_length=200)
    every: str | None = Field(default=None, max_length=32)
    at: datetime | None = _ts()
    timezone: str = Field(default="UTC", max_length=64)
    enabled: bool = True
    catch_up: str = Field(default="skip", max_length=8)
    max_concurrent: int = 1
    end_at: datetime | None = _ts()
    created_at: datetime = _stamp()
    updated_at: datetime = _stamp()
    # The definition's stream sequence: fires of an older definition (before an edit) are told apart.
    def_seq: int | None = None
    last_fired_at: datetime | None = _ts()
    last_fire_seq: int | None = None
    # The time the last fire named for the next one (`Nats-Schedule-Next`): what `catch_up` judges by.
    next_expected_at: datetime | None = _ts()


class ScheduleFire(GatewayModel, table=True):
    __tablename__ = "schedule_fires"
    __table_args__ = (Index("ix_schedule_fires_schedule_fired", "schedule_id", "fired_at"),)

    id: str = Field(primary_key=True, max_length=160)  # `fire:<schedule>:<seq>` or `now:<schedule>:<n>`
    schedule_id: str = Field(max_length=64)
    seq: int | None = None  # the fire's stream sequence (None: run now)
    fired_at: datetime = _stamp()
    outcome: str = Field(max_length=16)  # started | skipped
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    task_id: str | None = Field(default=None, index=True, max_length=64)
    late: bool = False  # the made-up fire after a full stop of the cluster


class Hook(GatewayModel, table=True):
    """An inbound webhook: a signed call to `/hooks/{id}` starts a task of `workflow_id`, owned by
    the hook's creator, with the input `input_mapping` takes from the call."""

    __tablename__ = "hooks"

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=200)
    workflow_id: str = Field(max_length=64)
    input_mapping: dict[str, Any] = _json(dict)
    # The signing secret, encrypted with the deployment's key: it must be read back to check
    # each call's HMAC (a hash would not do), and is shown to the creator once.
    secret_enc: str = Field(sa_column=Column(Text, nullable=False))
    signature: str = Field(default="standard", max_length=16)  # standard | github
    webhook: str | None = Field(default=None, max_length=2000)  # the completion callback of its tasks
    enabled: bool = True
    calls: int = 0
    last_called_at: datetime | None = _ts()
    created_at: datetime = _stamp()
    updated_at: datetime = _stamp()


class CallbackDelivery(GatewayModel, table=True):
    """One completion callback: written `waiting` with the task (or chat or `/lg` run), `pending`
    once it ended (its payload fixed then), `delivered` or `failed` at last. `kind` says whose end
    it reports and so who fixes the payload: `task` (the `callback-ends` consumer), `chat` or `lg`
    (the conversation queue, when the run's end is recorded: triggers/run_callbacks.py)."""

    __tablename__ = "callback_deliveries"
    __table_args__ = (UniqueConstraint("task_id", "run", name="uq_callback_deliveries_task_run"),)

    id: str = Field(primary_key=True, max_length=64)  # also the `webhook-id` of every attempt
    task_id: str = Field(index=True, max_length=64)  # a chat or `/lg` run's id (= its task's id)
    # A task's retry number; a chat or `/lg` run's end number (an `/lg` run resumed after its approval ends again).
    run: int = 0
    kind: str = Field(default="task", max_length=8)  # task | chat | lg (migration 0017)
    user_id: str = Field(index=True, max_length=64)
    url: str = Field(max_length=2000)
    status: str = Field(default="waiting", max_length=16)
    attempts: int = 0
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    payload: dict[str, Any] | None = _json(None)
    created_at: datetime = _stamp()
    ended_at: datetime | None = _ts()
    next_attempt_at: datetime | None = _ts()
    delivered_at: datetime | None = _ts()
    updated_at: datetime | None = _ts()
