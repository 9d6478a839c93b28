"""Identifiers that sort by creation time (so `id` order is creation order for pagination).

Within one process they strictly increase, even for ids made in the same millisecond (two
messages written by one transaction keep the order they were written in)."""

from __future__ import annotations

import secrets
import threading
import time

_RANDOM_BITS = 40
_lock = threading.Lock()
_last = (0, 0)  # the millisecond and the random part of the last id made here


def new_id(prefix: str) -> str:
    global _last
    ms = int(time.time() * 1000)
    with _lock:
        last_ms, last_random = _last
        if ms > last_ms:
            random = secrets.randbits(_RANDOM_BITS)
        elif last_random + 1 < 1 << _RANDOM_BITS:
            ms, random = last_ms, last_random + 1
        else:  # the random part is used up: borrow the next millisecond
            ms, random = last_ms + 1, secrets.randbits(_RANDOM_BITS - 1)
        _last = (ms, random)
    return f"{prefix}_{ms:012x}{random:010x}"
