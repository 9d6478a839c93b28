"""Identifiers that sort by creation time (so `id` order is creation order for pagination)."""

from __future__ import annotations

import secrets
import time


def new_id(prefix: str) -> str:
    return f"{prefix}_{int(time.time() * 1000):012x}{secrets.token_hex(5)}"
