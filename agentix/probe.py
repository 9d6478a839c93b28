"""The HTTP probe of `agentix up`'s waits (NATS `/healthz`, the gateway's `/ready`), with the
standard library: the supervisor stays small, and an HTTP client library would be most of it."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def get_json(url: str, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The JSON object a 200 answer carries; None for another status, no answer, or a body that
    is not a JSON object."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # a status >= 400 raises HTTPError
            if resp.status != 200:
                return None
            doc = json.loads(resp.read())
    except (OSError, ValueError):  # URLError and HTTPError are OSErrors, a bad body a ValueError
        return None
    return doc if isinstance(doc, dict) else None
