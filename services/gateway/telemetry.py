"""OpenTelemetry for the gateway: a tracer provider (OTLP/HTTP export only when
`settings.otlp_endpoint` is set) and the server span around each HTTP request."""

from __future__ import annotations

import logging

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from shared.settings import VERSION, Settings

log = logging.getLogger("agentix.gateway.telemetry")
_installed = False


def setup_tracing(settings: Settings, service: str = "gateway") -> TracerProvider | None:
    """Install a global provider once per process when an OTLP endpoint is configured."""
    global _installed
    if not settings.otlp_endpoint or _installed:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = settings.otlp_endpoint.rstrip("/")
    if not endpoint.endswith("/v1/traces"):
        endpoint += "/v1/traces"
    provider = TracerProvider(
        resource=Resource.create({"service.name": f"agentix-{service}", "service.version": VERSION})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    _installed = True
    log.info("exporting traces to %s", endpoint)
    return provider
