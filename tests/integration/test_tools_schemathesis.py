"""Property-based check of the KB, memory and report routes with the tool services running
(the gateway's own fuzz test skips them): no input may produce a 5xx or break the schema."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
from schemathesis import checks

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.conftest import make_settings
from tests.integration.test_tools_support import Process, service_env
from tests.support.nats_server import NatsServer

OURS = ("/api/v1/kb", "/api/v1/memory", "/api/v1/reports")
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


class ThreadedGateway:
    """The gateway on its own loop in a thread: schemathesis calls it synchronously."""

    def __init__(self, settings: Settings) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.gateway = EmbeddedGateway(settings)

    def __enter__(self) -> EmbeddedGateway:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.gateway.start(), self.loop).result(60)
        return self.gateway

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.gateway.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def live(nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedGateway]:
    settings = make_settings(nats_server.url, tmp_path_factory.mktemp("tools-fuzz"), rate_limit_per_min=1_000_000)
    logs = Path(settings.data_dir)
    logs.mkdir(parents=True, exist_ok=True)
    env = service_env(settings)
    services = [
        Process("services.tools_py", env, logs / "py.log").start(),
        Process("services.tools_go_equiv", env, logs / "go.log").start(),
    ]
    try:
        with ThreadedGateway(settings) as gateway:
            token = mint_token(settings, "fuzzer")
            with httpx.Client(base_url=f"{gateway.url}/api/v1", headers={"Authorization": f"Bearer {token}"}) as c:
                for _ in range(200):  # the tool services are up once the KB list answers
                    if c.get("/kb").status_code == 200:
                        break
                    threading.Event().wait(0.1)
                assert c.post("/kb", json={"name": "fuzz"}).status_code == 201
            yield gateway
    finally:
        for proc in services:
            proc.terminate()


def test_kb_memory_report_routes_never_fail_on_bad_input(live: EmbeddedGateway) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    headers = {"Authorization": f"Bearer {mint_token(live.settings, 'fuzzer')}"}
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith(OURS) or operation.path.endswith("/stream"):
            continue
        operations += 1

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=10,
            deadline=None,
            database=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        )
        def check(case: Any) -> None:
            case.call_and_validate(headers=headers, timeout=30, checks=CHECKS)

        try:
            check()
        except Exception as exc:  # report every operation's failure together
            failures.append(f"{operation.label}: {exc}")
    assert operations >= 12
    assert not failures, "\n\n".join(failures)
