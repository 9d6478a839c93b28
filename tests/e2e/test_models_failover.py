"""Models through the whole suite (gateway, dispatcher, tool services as processes) and the
scripted OpenAI-protocol server: models and the chain set over the admin API; the primary answers
500s → the fallback answers, visible in the token events' `model`, the node's usage and the task
record; a hot swap over the admin API applies to tasks started afterwards, and each task record
keeps the chain revision it ran with."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentix.sse import SseEvent, parse_stream
from shared.bus import Bus
from tests.e2e.conftest import RunningSuite, start_suite
from tests.support import openai_server as oai
from tests.support.dispatcher import chain_applied

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT_S = 30.0
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def srv() -> Iterator[oai.OpenAIServer]:
    server = oai.OpenAIServer().start_in_thread()
    yield server
    server.stop_thread()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory, srv: oai.OpenAIServer) -> Iterator[RunningSuite]:
    running = start_suite(tmp_path_factory.mktemp("models"), {"AGENTIX_LLM_RETRY_ATTEMPTS": "2"})
    yield running
    running.stop()


def admin(suite: RunningSuite, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    resp = httpx.request(method, f"{suite.url}/api/v1/admin{path}", json=body,
                         headers=suite.headers("root", admin=True), timeout=10)
    assert resp.status_code < 300, resp.text
    return resp.json()


def wait_applied(suite: RunningSuite, revision: int) -> None:
    """Until the dispatcher's heartbeat says new tasks run with chain `revision`."""

    async def wait() -> None:
        bus = await Bus.connect(suite.settings, "e2e-models")
        try:
            await chain_applied(bus, revision, TIMEOUT_S)
        finally:
            await bus.close()

    asyncio.run(wait())


def run_task(suite: RunningSuite, text: str) -> tuple[str, list[SseEvent]]:
    dsl = json.loads((EXAMPLES / "hello.json").read_text())
    resp = httpx.post(f"{suite.url}/api/v1/tasks", json={"dsl": dsl, "input": {"text": text}},
                      headers=suite.headers(), timeout=10)
    assert resp.status_code == 202, resp.text
    task_id = resp.json()["id"]
    with httpx.Client(timeout=httpx.Timeout(10, read=TIMEOUT_S)) as client, client.stream(
            "GET", f"{suite.url}/api/v1/tasks/{task_id}/events", headers=suite.headers()) as stream:
        events = list(parse_stream(stream.iter_lines()))
    return task_id, events


def record(suite: RunningSuite, task_id: str) -> dict[str, Any]:
    return httpx.get(f"{suite.url}/api/v1/tasks/{task_id}", headers=suite.headers(), timeout=10).json()


def asked(srv: oai.OpenAIServer, model: str) -> int:
    return sum(1 for r in srv.requests() if r["model"] == model)


def test_failover_and_hot_swap_through_the_suite(suite: RunningSuite, srv: oai.OpenAIServer) -> None:
    for name in ("primary", "fallback"):
        admin(suite, "POST", "/models", {"name": name, "base_url": srv.url, "model": f"{name}-m",
                                         "api_key": f"sk-test-{name}-0123456789abcdef"})
    first_rev = admin(suite, "PUT", "/models/chain", {"active": "primary", "fallbacks": ["fallback"]})["revision"]
    wait_applied(suite, first_rev)
    srv.script([], model="primary-m", then=oai.server_error(500, "primary is down"))
    srv.script([], model="fallback-m", then=oai.reply("The fallback model answers."))

    task_id, events = run_task(suite, "Who answers?")
    assert events[-1].event == "done" and events[-1].data["status"] == "done"
    tokens = [e.data for e in events if e.event == "token"]
    assert tokens and {t["model"] for t in tokens} == {"fallback"}
    assert "".join(t["text"] for t in tokens) == "The fallback model answers."
    end = next(e.data for e in events if e.event == "node.end" and e.data["node_id"] == "ans")
    assert end["usage"]["models"] == ["fallback"] and end["usage"]["completion_tokens"] > 0
    assert asked(srv, "primary-m") == 2 and asked(srv, "fallback-m") == 1  # two attempts, then failover
    # The configured API key went to the endpoint, and nowhere into the events.
    assert srv.requests()[-1]["headers"]["authorization"] == "Bearer sk-test-fallback-0123456789abcdef"
    assert "sk-test-" not in json.dumps([e.data for e in events])
    first = record(suite, task_id)
    assert first["status"] == "done" and first["output"] == {"out": "The fallback model answers."}
    assert first["chain_revision"] == first_rev and first["usage"]["prompt_tokens"] > 0

    # Hot swap: only the fallback. Tasks started afterwards run with the new revision.
    second_rev = admin(suite, "PUT", "/models/chain", {"active": "fallback", "fallbacks": []})["revision"]
    assert second_rev > first_rev
    wait_applied(suite, second_rev)
    task_id2, events2 = run_task(suite, "And now?")
    assert events2[-1].data["status"] == "done"
    assert asked(srv, "primary-m") == 2  # no longer in the chain: not asked
    assert record(suite, task_id2)["chain_revision"] == second_rev
    assert record(suite, task_id)["chain_revision"] == first_rev  # the first task's record keeps its own
