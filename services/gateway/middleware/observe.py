"""Request metrics and a structured (JSON) access log line per request. Logs carry the route
template, status, duration, user and request id — never headers, query strings or bodies.
Health probes (`/health`, `/ready`) are polled every fraction of a second by `agentix up` and
every few seconds by orchestrators: their lines are logged only when a probe's status changes,
so the log says "not ready" once and "ready" once instead of once per poll. Metrics count them all."""

from __future__ import annotations

import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.fleet.metrics import GatewayMetrics
from services.gateway.middleware.common import route_template, state

access_log = logging.getLogger("agentix.gateway.access")
PROBE_ROUTES = frozenset({"/health", "/ready"})


class ObserveMiddleware:
    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self._probe_status: dict[str, int] = {}  # route → status of its last logged line

    def _worth_logging(self, route: str, status: int) -> bool:
        if route not in PROBE_ROUTES:
            return True
        changed = self._probe_status.get(route) != status
        self._probe_status[route] = status
        return changed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def _send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, _send)
        finally:
            elapsed = time.perf_counter() - start
            route = route_template(scope)
            method = scope["method"]
            self.metrics.requests.labels(method=method, route=route, status=str(status)).inc()
            self.metrics.latency.labels(method=method, route=route).observe(elapsed)
            # The line is built only when it is logged (not at the WARNING level of benchmarks).
            if self._worth_logging(route, status) and access_log.isEnabledFor(logging.INFO):
                self._log(scope, method, route, status, elapsed)

    @staticmethod
    def _log(scope: Scope, method: str, route: str, status: int, elapsed: float) -> None:
        st = state(scope)
        principal = st.get("principal")
        access_log.info(
            json.dumps(
                {
                    "event": "http",
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                    "user": principal.id if principal else None,
                    "request_id": st.get("request_id"),
                }
            )
        )
