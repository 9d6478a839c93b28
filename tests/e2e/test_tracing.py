"""Issue 5's trace promise: with an OTLP endpoint configured, one task's spans — the gateway's
HTTP request, the dispatcher's run, its nodes and model call, the tool calls and the tool
services' handling — arrive at an OTLP/HTTP receiver (started here) under one trace id, each
parented to the span that caused it across the NATS hops."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta
from tests.conftest import drop_deployment, make_settings
from tests.e2e.conftest import RunningSuite, start_suite
from tests.support.nats_server import NatsServer

pytestmark = pytest.mark.e2e
WAIT_S = 60.0
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items if isinstance(kv, KeyValue)}


@dataclass
class OtlpReceiver:
    """A minimal OTLP/HTTP trace receiver: POST /v1/traces with a protobuf body."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    bad_requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        received: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for sp in scope_spans.spans:
                    received.append(ReceivedSpan(service, sp.name, sp.trace_id.hex(), sp.span_id.hex(),
                                                 sp.parent_span_id.hex(), _attributes(sp.attributes)))
        with self.lock:
            self.spans.extend(received)

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or "protobuf" not in self.headers.get("Content-Type", ""):
                receiver.bad_requests.append(f"{self.path} {self.headers.get('Content-Type')}")
                self.send_response(404)
                self.end_headers()
                return
            receiver.add(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def otlp_receiver() -> Iterator[tuple[OtlpReceiver, str]]:
    sink = OtlpReceiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(sink))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[OtlpReceiver, str]]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def traced_suite(tmp_path_factory: pytest.TempPathFactory,
                 receiver: tuple[OtlpReceiver, str]) -> Iterator[RunningSuite]:
    # Our own suite: the shared one exports nowhere. A short batch delay makes spans arrive soon.
    running = start_suite(tmp_path_factory.mktemp("traced"),
                          {"AGENTIX_OTLP_ENDPOINT": receiver[1], "OTEL_BSP_SCHEDULE_DELAY": "100"})
    yield running
    running.stop()


DSL = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "doc", "kind": "tool",
         "config": {"tool": "doc_parse",
                    "args": {"text": "# {{ in.title }}\n\nTraced end to end.", "filename": "a.md"}}},
        {"id": "mem", "kind": "tool", "config": {"tool": "memory_list", "args": {}}},
        {"id": "ans", "kind": "agent", "config": {"prompt": "Summarise: {{ doc.title }} ({{ mem }})"}},
        {"id": "out", "kind": "output", "config": {"value": "{{ ans }}"}},
    ],
    "edges": [{"source": "in", "target": "doc"}, {"source": "doc", "target": "mem"},
              {"source": "mem", "target": "ans"}, {"source": "ans", "target": "out"}],
}


def _run_task(suite: RunningSuite) -> str:
    resp = httpx.post(f"{suite.url}/api/v1/tasks", json={"dsl": DSL, "input": {"title": "Tracing"}},
                      headers=suite.headers(), timeout=10)
    assert resp.status_code == 202, resp.text
    task_id = resp.json()["id"]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        task = httpx.get(f"{suite.url}/api/v1/tasks/{task_id}", headers=suite.headers(), timeout=10).json()
        if task["status"] not in ("submitted", "queued", "running"):
            assert task["status"] == "done", (task["status"], task.get("error_code"), task.get("error"))
            return task_id
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} did not finish")


def _wait_for(receiver: OtlpReceiver, ready: Any) -> list[ReceivedSpan]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        spans = receiver.snapshot()
        if ready(spans):
            return spans
        time.sleep(0.1)
    raise AssertionError(f"spans never arrived; got {sorted({(s.service, s.name) for s in receiver.snapshot()})}")


def test_one_trace_across_gateway_dispatcher_and_tools(traced_suite: RunningSuite,
                                                       receiver: tuple[OtlpReceiver, str]) -> None:
    sink = receiver[0]
    task_id = _run_task(traced_suite)

    def of_task(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        run = [s for s in spans if s.name == "dispatch tasks.submit" and s.attributes.get("agentix.task_id") == task_id]
        if not run:
            return []
        return [s for s in spans if s.trace_id == run[0].trace_id]

    wanted = {("agentix-gateway", "HTTP POST /api/v1/tasks"), ("agentix-dispatcher", "dispatch tasks.submit"),
              ("agentix-dispatcher", "node agent"), ("agentix-dispatcher", "llm.complete"),
              ("agentix-tools-py", "tool doc_parse"), ("agentix-tools-go", "tool memory_list")}
    spans = of_task(_wait_for(sink, lambda got: wanted <= {(s.service, s.name) for s in of_task(got)}))
    assert not sink.bad_requests
    by_id = {s.span_id: s for s in spans}
    assert len({s.trace_id for s in spans}) == 1

    def parent(s: ReceivedSpan) -> ReceivedSpan:
        assert s.parent_id in by_id, f"{s.service} {s.name} has no parent in the trace"
        return by_id[s.parent_id]

    def one(service: str, name: str) -> ReceivedSpan:
        found = [s for s in spans if s.service == service and s.name == name]
        assert len(found) == 1, (service, name, found)
        return found[0]

    http = one("agentix-gateway", "HTTP POST /api/v1/tasks")
    run = one("agentix-dispatcher", "dispatch tasks.submit")
    # The dispatcher's run continues the HTTP request that published the task (over NATS).
    ancestors, above = [], run
    while above.parent_id:
        above = parent(above)
        ancestors.append(above)
    assert ancestors[-1] is http and {a.service for a in ancestors} == {"agentix-gateway"}
    assert run.attributes["messaging.system"] == "nats"
    # One span per node, named by kind, parented to the run; ids are attributes.
    nodes = {s.attributes["agentix.node_id"]: s for s in spans if s.name.startswith("node ")}
    assert {k: v.name for k, v in nodes.items()} == {
        "in": "node input", "doc": "node tool", "mem": "node tool", "ans": "node agent", "out": "node output"}
    assert all(parent(s) is run and s.attributes["agentix.task_id"] == task_id for s in nodes.values())
    # The model call sits under its node.
    assert parent(one("agentix-dispatcher", "llm.complete")) is nodes["ans"]
    # Each tool call: a client span under its node, continued by the tool service over NATS.
    calls = (("doc", "agentix-tools-py", "doc_parse"), ("mem", "agentix-tools-go", "memory_list"))
    for node_id, service, tool in calls:
        call = one("agentix-dispatcher", f"tool.call {tool}")
        assert parent(call) is nodes[node_id]
        assert call.attributes["messaging.system"] == "nats" and call.attributes["agentix.node_id"] == node_id
        handled = one(service, f"tool {tool}")
        assert parent(handled) is call and handled.attributes["messaging.system"] == "nats"


@pytest.fixture
def own_receiver() -> Iterator[tuple[OtlpReceiver, str]]:
    with otlp_receiver() as running:
        yield running


async def test_spans_are_flushed_on_sigterm(nats_server: NatsServer, tmp_path: Path,
                                            own_receiver: tuple[OtlpReceiver, str]) -> None:
    """With a batch delay far longer than the test, the span still arrives: a service exports
    what it buffered when it stops on SIGTERM."""
    sink, endpoint = own_receiver
    settings = make_settings(nats_server.url, tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTIX_", "OTEL_"))}
    env.update({"AGENTIX_NATS_SERVERS": nats_server.url, "AGENTIX_SUBJECT_PREFIX": settings.subject_prefix,
                "AGENTIX_DATA_DIR": str(settings.data_dir), "AGENTIX_OTLP_ENDPOINT": endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "600000"})
    proc = await asyncio.to_thread(subprocess.Popen, [sys.executable, "-m", "services.tools_py"], cwd=ROOT,
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bus = await Bus.connect(settings, name="test")
    try:
        client = ToolClient(bus, services=("py",))
        for _ in range(int(WAIT_S / 0.1)):  # until the service answers
            if await client.list_tools(timeout_s=0.5):
                break
            await asyncio.sleep(0.1)
        reply = await client.call("doc_parse", {"text": "# Flushed", "filename": "f.md"},
                                  ToolMeta(task_id="t-flush", node_id="n"))
        assert reply.ok, reply
        assert not [s for s in sink.snapshot() if s.service == "agentix-tools-py"]  # still buffered
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        await drop_deployment(bus)
        await bus.close()
    assert [s.name for s in sink.snapshot() if s.service == "agentix-tools-py"] == ["tool doc_parse"]


def test_without_an_endpoint_nothing_is_exported() -> None:
    from shared.settings import Settings
    from shared.telemetry import setup_tracing, traces_url

    assert setup_tracing(Settings(otlp_endpoint=None), "x") is None
    assert traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"
