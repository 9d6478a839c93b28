"""The short text form of a value that events carry (`node.end` output, `tool.result` result)."""

from __future__ import annotations

import json
from typing import Any

PREVIEW_CHARS = 300


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """At most `limit` characters; a cut preview ends in "…" (the redactor relies on that mark to
    drop what could be the start of a secret cut in half)."""
    if value is None:
        return "null"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
