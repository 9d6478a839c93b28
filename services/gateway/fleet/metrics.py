"""Prometheus metrics of one gateway app (own registry, so several apps can live in a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "agentix_http_requests",
            "HTTP requests by route template, method and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "agentix_http_request_duration_seconds",
            "HTTP request latency (to the end of the response)",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.tasks = Gauge("agentix_tasks", "Task records by state", ["state"], registry=self.registry)
        self.sse_clients = Gauge("agentix_sse_clients", "Open SSE streams", registry=self.registry)
        self.nats_reconnects = Gauge("agentix_nats_reconnects", "NATS reconnects", registry=self.registry)
        self.recorded_events = Counter(
            "agentix_recorder_events", "Events applied by the task recorder", ["type"], registry=self.registry
        )

    def render(self, task_counts: dict[str, int], reconnects: int) -> bytes:
        for state, count in task_counts.items():
            self.tasks.labels(state=state).set(count)
        self.nats_reconnects.set(reconnects)
        return generate_latest(self.registry)
