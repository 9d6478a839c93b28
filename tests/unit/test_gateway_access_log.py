"""The access log: every request gets a line, except health probes that keep answering the
same status (`agentix up` polls /ready a few times a second while the suite starts)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest
from starlette.types import Receive, Scope, Send

from services.gateway.fleet.metrics import GatewayMetrics
from services.gateway.middleware.observe import ObserveMiddleware


class Answers:
    """An ASGI app that answers each request with the next status in the list."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = iter(statuses)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = SimpleNamespace(path=scope["path"])  # what routing leaves in the scope
        await send({"type": "http.response.start", "status": next(self.statuses), "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def request(app: ObserveMiddleware, path: str) -> None:
    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: dict) -> None:
        return None

    await app({"type": "http", "method": "GET", "path": path, "headers": []}, receive, send)


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int]]:
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "agentix.gateway.access"]
    return [(line["route"], line["status"]) for line in lines]


async def test_probes_are_logged_only_when_their_status_changes(caplog: pytest.LogCaptureFixture) -> None:
    metrics = GatewayMetrics()
    statuses = [503] * 14 + [200] * 5 + [503, 200]
    app = ObserveMiddleware(Answers(statuses), metrics=metrics)
    with caplog.at_level(logging.INFO, logger="agentix.gateway.access"):
        for _ in statuses:
            await request(app, "/ready")
    assert logged(caplog) == [("/ready", 503), ("/ready", 200), ("/ready", 503), ("/ready", 200)]
    counted = metrics.registry.get_sample_value(
        "agentix_http_requests_total", {"method": "GET", "route": "/ready", "status": "503"}
    )
    assert counted == 15  # the metrics still count every probe


async def test_other_routes_get_a_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    app = ObserveMiddleware(Answers([200, 200, 200, 200]), metrics=GatewayMetrics())
    with caplog.at_level(logging.INFO, logger="agentix.gateway.access"):
        for path in ["/api/v1/tasks", "/api/v1/tasks", "/health", "/health"]:
            await request(app, path)
    assert logged(caplog) == [("/api/v1/tasks", 200), ("/api/v1/tasks", 200), ("/health", 200)]
