"""Issue 2's promise: submit over HTTP, watch it stream, drop the connection mid-stream and
resume with Last-Event-ID without losing or doubling a token."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from agentix.sse import parse_stream
from tests.e2e.conftest import RunningSuite

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.e2e


def submit(suite: RunningSuite, dsl: dict, task_input: dict) -> str:
    resp = httpx.post(f"{suite.url}/api/v1/tasks", json={"dsl": dsl, "input": task_input},
                      headers=suite.headers(), timeout=10)
    assert resp.status_code == 202, resp.text
    body = resp.json()
    assert body["status"] == "submitted" and body["links"]["events"]
    return body["id"]


def test_stream_survives_a_dropped_connection(running_suite: RunningSuite) -> None:
    dsl = json.loads((EXAMPLES / "hello.json").read_text())
    task_id = submit(running_suite, dsl, {"text": "How does Agentix stream tokens?"})
    url = f"{running_suite.url}/api/v1/tasks/{task_id}/stream"
    seen: list[tuple[int, str, dict]] = []
    with httpx.Client(timeout=httpx.Timeout(10, read=30)) as client:
        # First connection: read the first few events, then hang up.
        with client.stream("GET", url, headers=running_suite.headers()) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            for ev in parse_stream(resp.iter_lines()):
                seen.append((int(ev.id), ev.event, ev.data))
                if sum(1 for _, name, _ in seen if name == "token") >= 3:
                    break
        last_id = seen[-1][0]
        headers = {**running_suite.headers(), "Last-Event-ID": str(last_id)}
        with client.stream("GET", url, headers=headers) as resp:
            for ev in parse_stream(resp.iter_lines()):
                seen.append((int(ev.id), ev.event, ev.data))
    ids = [i for i, _, _ in seen]
    assert ids == sorted(set(ids)), "an event was repeated or reordered after resuming"
    ns = [d["n"] for _, _, d in seen]
    assert ns == sorted(ns) and len(ns) == len(set(ns))
    assert seen[-1][1] == "done" and seen[-1][2]["status"] == "done"
    tokens = "".join(d["text"] for _, name, d in seen if name == "token")
    output = seen[-1][2]["output"]["out"]
    assert tokens and tokens == output

    task = httpx.get(f"{running_suite.url}/api/v1/tasks/{task_id}", headers=running_suite.headers()).json()
    assert task["status"] == "done" and task["output"] == {"out": output}
    assert {n["id"]: n["status"] for n in task["nodes"]} == {"in": "done", "ans": "done", "out": "done"}


def test_replay_of_a_finished_task_ends(running_suite: RunningSuite) -> None:
    dsl = json.loads((EXAMPLES / "hello.json").read_text())
    task_id = submit(running_suite, dsl, {"text": "Replay?"})
    with httpx.Client(timeout=httpx.Timeout(10, read=30)) as client:
        url = f"{running_suite.url}/api/v1/tasks/{task_id}/exec"
        with client.stream("GET", url, headers=running_suite.headers()) as resp:
            first = [ev.event for ev in parse_stream(resp.iter_lines())]
        with client.stream("GET", url, headers=running_suite.headers()) as resp:
            second = [ev.event for ev in parse_stream(resp.iter_lines())]
    assert first == second and first[-1] == "done" and "token" not in first
    assert "node.start" in first and "node.end" in first


def test_bad_input_is_problem_json(running_suite: RunningSuite) -> None:
    url, headers = f"{running_suite.url}/api/v1/tasks", running_suite.headers()
    cases = [
        (httpx.post(url, content=b"{not json", headers={**headers, "Content-Type": "application/json"}), 400),
        (httpx.post(url, content=b"x", headers={**headers, "Content-Type": "text/plain"}), 415),
        (httpx.post(url, json={"input": {}}, headers=headers), 422),
        (httpx.post(url, json={"dsl": {"version": "1", "nodes": [{"id": "a", "kind": "wat", "config": {}}],
                                       "edges": []}}, headers=headers), 422),
        (httpx.get(f"{url}/t_missing", headers=headers), 404),
        (httpx.get(f"{url}/t_missing"), 401),
        (httpx.get(f"{url}/t_missing", headers={"Authorization": "Bearer nope"}), 401),
    ]
    for resp, status in cases:
        assert resp.status_code == status, (resp.request.url, resp.text)
        assert resp.headers["content-type"].startswith("application/problem+json")
        body = resp.json()
        assert body["status"] == status and body["title"] and "Traceback" not in resp.text
        assert resp.headers.get("x-request-id")


def test_tool_services_answer_srv_ping(running_suite: RunningSuite) -> None:
    import asyncio

    from shared.bus import Bus

    async def ping() -> set[str]:
        bus = await Bus.connect(running_suite.settings, "e2e-ping")
        inbox = bus.nc.new_inbox()
        sub = await bus.nc.subscribe(inbox)
        await bus.nc.publish("$SRV.PING", b"", reply=inbox)
        names: set[str] = set()
        try:
            while True:
                msg = await sub.next_msg(timeout=0.5)
                names.add(json.loads(msg.data)["name"])
        except Exception:
            pass
        await bus.close()
        return names

    assert {"tools-go", "tools-py"} <= asyncio.run(ping())
