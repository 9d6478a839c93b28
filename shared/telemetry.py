"""Tracing and logging setup shared by every service, plus a span helper that costs next to
nothing when tracing is off.

Traces are exported over OTLP/HTTP only when `settings.otlp_endpoint` is set; the batch
processor honours the standard `OTEL_BSP_*` environment variables (e.g. a short
`OTEL_BSP_SCHEDULE_DELAY` in tests). Spans are flushed by `shutdown_tracing()` and, as a last
resort, by the SDK's exit hook.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from shared.settings import VERSION, CommonSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("agentix.telemetry")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s%(trace)s: %(message)s"
_provider: TracerProvider | None = None
_tracer = trace.get_tracer("agentix")


def traces_url(endpoint: str) -> str:
    """`http://collector:4318` → `http://collector:4318/v1/traces` (a full URL is kept)."""
    url = endpoint.rstrip("/")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def setup_tracing(settings: CommonSettings, service: str) -> TracerProvider | None:
    """Install the process-wide provider (service.name `agentix-<service>`) when an OTLP endpoint
    is configured. Once per process: later calls (or no endpoint) return None."""
    global _provider
    if not settings.otlp_endpoint or _provider is not None:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint = traces_url(settings.otlp_endpoint)
    provider = TracerProvider(
        resource=Resource.create({"service.name": f"agentix-{service}", "service.version": VERSION})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    _provider = provider
    log.info("exporting traces to %s", endpoint)
    return provider


def shutdown_tracing() -> None:
    """Export what is buffered and stop (on SIGTERM, after the service drained)."""
    global _provider
    if _provider is None:
        return
    try:
        _provider.shutdown()
    except Exception:  # the collector being gone must not turn a clean stop into a crash
        log.warning("flushing traces failed", exc_info=True)
    _provider = None


# The API's global, read directly when it exists: get_tracer_provider() costs ~1 µs, and this
# check runs for every node of every task.
_READ_GLOBAL = hasattr(trace, "_TRACER_PROVIDER")


def tracing_enabled() -> bool:
    """True once a real provider is installed (here or by an embedding application)."""
    if _READ_GLOBAL:
        return trace._TRACER_PROVIDER is not None
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


NO_SPAN: AbstractContextManager[Span] = nullcontext(trace.INVALID_SPAN)


def span(name: str, attributes: Mapping[str, Any] | None = None,
         kind: SpanKind = SpanKind.INTERNAL) -> AbstractContextManager[Span]:
    """A current span, or a shared no-op one without a provider (hot paths such as one span per
    node must not pay for tracing that nobody exports). Name by kind/template, ids as attributes."""
    if not tracing_enabled():
        return NO_SPAN
    return _tracer.start_as_current_span(name, kind=kind, attributes=dict(attributes or {}))


class _TraceField(logging.Filter):
    """Adds ` trace=<id>` to records logged inside a span, so logs and traces can be joined."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        record.trace = f" trace={ctx.trace_id:032x}" if ctx.is_valid else ""
        return True


def setup_logging(settings: CommonSettings, service: str) -> None:
    """One log format for every service, with the trace id of the current span when there is one."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(_TraceField())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    log.debug("logging configured for %s", service)
