"""Identifiers and timestamps for rows this service owns. Ids start with the creation time in
milliseconds (hex), so ordering by id is ordering by age (used by cursors)."""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime


def new_id(prefix: str) -> str:
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(4)}"


def now() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    """A stored timestamp with its zone (SQLite hands rows back naive, in UTC)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def iso(value: datetime | None) -> str | None:
    """A timestamp for a reply, always with its zone."""
    stamped = aware(value)
    return None if stamped is None else stamped.isoformat()
