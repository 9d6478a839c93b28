"""Redaction of every event a task publishes besides the token stream.

Token and thinking text is redacted while it streams (`failover.py`); this covers what reaches
events by other roads: tool arguments and results, node output previews, errors, approval
messages, expert briefs, and the task's final output. It is the one place those fields are
redacted: the code that makes events (the tool executor, ReAct, the runner) never redacts them
itself, since every event of a task leaves through `RedactingEvents`. A preview cut at its length limit may end
in the first characters of a secret, too short to match yet: whatever could still be the start
of a secret is dropped from the end of a cut preview.
"""

from __future__ import annotations

from typing import Any

from services.dispatcher.redact import Redactor
from shared.contract.events import EventBase

# Redacted on the token path already (`llm/model.py`, a streaming redactor per stream).
STREAMED = frozenset({"token", "thinking.delta", "tool.input"})
PREVIEWS = frozenset({"output_preview", "result_preview"})
ELLIPSIS = "…"
# Identifiers and enums, never free text: left alone.
KEEP = frozenset({
    "type", "task_id", "n", "ts", "node_id", "call_id", "tool", "kind", "status", "code", "model",
    "handle", "name", "decision", "by", "grade", "action", "stage", "usage", "retry", "chain_revision",
    "prompt_versions", "document_id",
})


def redact_value(value: Any, redactor: Redactor) -> Any:
    """Every string inside a JSON-like value, redacted (the value is not modified)."""
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, redactor) for v in value]
    return value


def redact_preview(text: str, redactor: Redactor) -> str:
    if not text.endswith(ELLIPSIS):
        return redactor.redact(text)
    stream = redactor.stream()
    safe = stream.feed(text[: -len(ELLIPSIS)])  # the held-back tail (a possible cut secret) is dropped
    return safe + ELLIPSIS


def redact_event(event: EventBase, redactor: Redactor) -> EventBase:
    """Redact the free-text fields of `event` in place (streamed token/thinking events excepted)."""
    if event.type in STREAMED:
        return event
    for name in type(event).model_fields:
        if name in KEEP:
            continue
        value = getattr(event, name)
        if value is None or isinstance(value, bool | int | float):
            continue
        if name in PREVIEWS and isinstance(value, str):
            setattr(event, name, redact_preview(value, redactor))
        else:
            setattr(event, name, redact_value(value, redactor))
    return event


class RedactingEvents:
    """An event sink that redacts each event, then hands it to `inner` (an EventPublisher)."""

    def __init__(self, inner: Any, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    @property
    def n(self) -> int:
        return self.inner.n

    async def emit(self, event: EventBase) -> EventBase:
        return await self.inner.emit(redact_event(event, self.redactor))

    async def flush(self) -> None:
        await self.inner.flush()
