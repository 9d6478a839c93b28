"""W3C trace context carried in NATS headers, and spans named by subject template."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind

tracer = trace.get_tracer("agentix.bus")


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str] | None:
    """Return headers with `traceparent`/`tracestate` of the current span added. Without a span
    and without headers, None: a message without headers is cheaper on both ends."""
    if not trace.get_current_span().get_span_context().is_valid:
        return dict(headers) if headers else None
    carrier = dict(headers or {})
    propagate.inject(carrier)
    return carrier


def extract_context(headers: Mapping[str, str] | None) -> otel_context.Context:
    return propagate.extract(dict(headers or {}))


@contextmanager
def consumer_span(name: str, headers: Mapping[str, str] | None, **attributes: Any) -> Iterator[Span]:
    """A span for handling a message, parented to the sender's context."""
    ctx = extract_context(headers)
    with tracer.start_as_current_span(
        name, context=ctx, kind=SpanKind.CONSUMER, attributes={"messaging.system": "nats", **attributes}
    ) as span:
        yield span
