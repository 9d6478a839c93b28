"""Token estimates for when a server omits usage and for charging a budget while streaming.
About four characters per token for English and code: close enough for budgets, and cheap."""

from __future__ import annotations

import json
import math
from typing import Any

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role and separators per message


def estimate_text(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def content_text(content: Any) -> str:
    """The text of a message `content` (a string or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def estimate_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    total = 0
    for m in messages:
        total += MESSAGE_OVERHEAD + estimate_text(content_text(m.get("content")))
        if m.get("tool_calls"):
            total += estimate_text(json.dumps(m["tool_calls"]))
    if tools:
        total += estimate_text(json.dumps(tools))
    return total
