"""A server span per HTTP request, parented to an incoming `traceparent`; NATS publishes made
while handling the request carry it on (shared.bus injects the current context)."""

from __future__ import annotations

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.middleware.common import route_template

tracer = trace.get_tracer("agentix.gateway")


class TracingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        ctx = propagate.extract(carrier)
        method = scope["method"]
        with tracer.start_as_current_span(
            f"HTTP {method}",
            context=ctx,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope.get("path", "")},
        ) as span:
            status = 500

            async def _send(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await self.app(scope, receive, _send)
            finally:
                route = route_template(scope)
                span.update_name(f"HTTP {method} {route}")
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
