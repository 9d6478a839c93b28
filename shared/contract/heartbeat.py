"""Heartbeats (`P.heartbeat.<service>.<instance>`) and health replies (`P.health.<service>`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from shared.contract.base import Contract, utcnow


class Load(Contract):
    inflight: int = 0
    done: int = 0


class Heartbeat(Contract):
    service: str
    instance: str
    version: str
    started_at: datetime
    ts: datetime = Field(default_factory=utcnow)
    interval_s: float = 5.0
    load: Load = Field(default_factory=Load)
    detail: dict[str, Any] = Field(default_factory=dict)


class HealthReply(Contract):
    service: str
    instance: str
    ok: bool
    checks: dict[str, Any] = Field(default_factory=dict)
