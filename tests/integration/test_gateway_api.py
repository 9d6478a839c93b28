"""Gateway HTTP API over a real server: auth, ownership, bad input, tasks, workflows."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest

from services.gateway.embedded import EmbeddedGateway
from services.gateway.runs.recorder import Recorder
from services.gateway.tables import Task
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import EventPublisher, last_event_n
from shared.contract.events import ApprovalRequestEvent, DoneEvent, StatusEvent
from shared.contract.task import ResumeMessage, TaskMessage
from shared.settings import Settings
from tests.support.wait import eventually

DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "ans", "kind": "agent", "config": {"prompt": "Answer {{ in.text }}"}},
        {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}},
    ],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}
APPROVAL_DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "ok", "kind": "approval", "config": {"message": "go?"}},
        {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}},
    ],
    "edges": [{"source": "in", "target": "ok"}, {"source": "ok", "target": "out"}],
}
ADMIN_ROUTES = [
    ("GET", "/api/v1/admin/models"),
    ("POST", "/api/v1/admin/models"),
    ("GET", "/api/v1/admin/models/m_x"),
    ("PUT", "/api/v1/admin/models/m_x"),
    ("DELETE", "/api/v1/admin/models/m_x"),
    ("GET", "/api/v1/admin/models/chain"),
    ("PUT", "/api/v1/admin/models/chain"),
    ("GET", "/api/v1/admin/pricing"),
    ("PUT", "/api/v1/admin/pricing"),
    ("GET", "/api/v1/admin/prompts"),
    ("GET", "/api/v1/admin/prompts/p"),
    ("POST", "/api/v1/admin/prompts/p/versions"),
    ("POST", "/api/v1/admin/prompts/p/activate"),
    ("GET", "/api/v1/admin/status"),
    ("GET", "/api/v1/admin/overview"),
    ("GET", "/api/v1/admin/audit"),
    ("GET", "/api/v1/admin/guardrail-events"),
]


async def queue(bus: Bus) -> Any:
    """The dispatchers' work-queue consumer (a work queue allows no second consumer)."""
    return await bus.js.pull_subscribe_bind(durable=bus.names.dispatcher_consumer, stream=bus.names.tasks_stream)


def bearer(settings: Settings, user: str, admin: bool = False) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(settings, user, admin=admin)}"}


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "alice"), timeout=10) as c:
        yield c


@pytest.fixture
async def bob(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "bob"), timeout=10) as c:
        yield c


@pytest.fixture
async def anon(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gw.url, timeout=10) as c:
        yield c


def assert_problem(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert {"type", "title", "status", "detail", "instance", "request_id"} <= body.keys()
    assert body["status"] == status
    assert body["request_id"] == resp.headers["x-request-id"]
    assert "Traceback" not in resp.text
    return body


async def submit(client: httpx.AsyncClient, dsl: dict[str, Any] = DSL, **extra: Any) -> str:
    resp = await client.post("/api/v1/tasks", json={"dsl": dsl, "input": {"text": "hi"}, **extra})
    assert resp.status_code == 202, resp.text
    assert resp.json()["status"] == "submitted"
    return resp.json()["id"]


async def wait_status(client: httpx.AsyncClient, task_id: str, status: str) -> dict[str, Any]:
    for _ in range(300):
        body = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        if body["status"] == status:
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} never reached {status}: {body}")


# ---- auth -------------------------------------------------------------------------------------


async def test_health_is_public_and_request_id_is_echoed(anon: httpx.AsyncClient) -> None:
    resp = await anon.get("/health", headers={"X-Request-ID": "abc-123"})
    assert resp.json() == {"status": "ok"}
    assert resp.headers["x-request-id"] == "abc-123"
    generated = await anon.get("/health")
    assert len(generated.headers["x-request-id"]) >= 16


def _forged(settings: Settings, **claims: Any) -> str:
    now = int(time.time())
    base = {"sub": "alice", "iat": now, "exp": now + 600} | claims
    return jwt.encode(base, settings.persistent_secret("jwt_secret"), algorithm="HS256")


def _alg_none() -> str:
    import base64

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    now = int(time.time())
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part({'sub': 'alice', 'iat': now, 'exp': now + 600})}."


async def test_bad_tokens_are_401(gw: EmbeddedGateway, anon: httpx.AsyncClient) -> None:
    s = gw.settings
    good = mint_token(s, "alice")
    head, payload, sig = good.split(".")
    tampered_payload = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB")
    cases = {
        "missing": None,
        "not bearer": f"Basic {good}",
        "empty": "Bearer",
        "garbage": "Bearer not.a.jwt",
        "expired": f"Bearer {_forged(s, iat=int(time.time()) - 7200, exp=int(time.time()) - 3600)}",
        "tampered": f"Bearer {head}.{tampered_payload}.{sig}",
        "alg none": f"Bearer {_alg_none()}",
        "wrong secret": "Bearer "
        + jwt.encode({"sub": "alice", "iat": int(time.time()), "exp": int(time.time()) + 60}, "x" * 40, "HS256"),
        "no exp": f"Bearer {jwt.encode({'sub': 'alice', 'iat': 1}, s.persistent_secret('jwt_secret'), 'HS256')}",
    }
    for name, value in cases.items():
        headers = {"Authorization": value} if value is not None else {}
        resp = await anon.get("/api/v1/tasks", headers=headers)
        body = assert_problem(resp, 401)
        assert resp.headers.get("www-authenticate") == "Bearer", name
        assert good not in resp.text
        assert body["title"] == "Unauthorized"
    ok = await anon.get("/api/v1/tasks", headers={"Authorization": f"Bearer {good}"})
    assert ok.status_code == 200


async def test_every_admin_route_is_403_for_users(alice: httpx.AsyncClient) -> None:
    for method, path in ADMIN_ROUTES:
        resp = await alice.request(method, path, json={} if method in {"POST", "PUT"} else None)
        assert_problem(resp, 403)


async def test_admin_by_allowlist(settings: Settings) -> None:
    gateway = await EmbeddedGateway(settings.model_copy(update={"admin_users": ["carol"]})).start()
    try:
        async with httpx.AsyncClient(base_url=gateway.url, headers=bearer(settings, "carol")) as c:
            assert (await c.get("/api/v1/admin/models")).status_code == 200
    finally:
        await gateway.stop()


async def test_another_users_task_is_404(alice: httpx.AsyncClient, bob: httpx.AsyncClient) -> None:
    task_id = await submit(alice)
    for method, suffix in [("GET", ""), ("POST", "/cancel"), ("POST", "/retry"), ("GET", "/events")]:
        assert_problem(await bob.request(method, f"/api/v1/tasks/{task_id}{suffix}"), 404)
    resp = await bob.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve"})
    assert_problem(resp, 404)
    assert task_id not in [t["id"] for t in (await bob.get("/api/v1/tasks")).json()["items"]]
    assert (await alice.get(f"/api/v1/tasks/{task_id}")).status_code == 200


# ---- bad input --------------------------------------------------------------------------------


async def test_bad_input_matrix(alice: httpx.AsyncClient) -> None:
    cases: list[tuple[str, dict[str, Any], int]] = [
        ("malformed json", {"content": b'{"dsl": ', "headers": {"content-type": "application/json"}}, 400),
        ("text body", {"content": b"hello", "headers": {"content-type": "text/plain"}}, 415),
        ("form body", {"content": b"a=b", "headers": {"content-type": "application/x-www-form-urlencoded"}}, 415),
        ("no content type", {"content": b"{}", "headers": {"content-type": ""}}, 415),
        ("missing dsl", {"json": {"input": {}}}, 422),
        ("dsl not an object", {"json": {"dsl": [1, 2]}}, 422),
        ("json array body", {"json": [1, 2, 3]}, 422),
        ("unknown field", {"json": {"dsl": DSL, "bogus": 1}}, 422),
        ("bad option", {"json": {"dsl": DSL, "options": {"timeout_s": -1}}}, 422),
        ("too large", {"json": {"dsl": DSL, "input": {"text": "x" * (1024 * 1024 + 10)}}}, 413),
    ]
    for name, kwargs, status in cases:
        resp = await alice.post("/api/v1/tasks", **kwargs)
        assert resp.status_code == status, (name, resp.text)
        assert_problem(resp, status)

    unknown_kind = {**DSL, "nodes": [*DSL["nodes"], {"id": "zz", "kind": "teleport"}]}
    body = assert_problem(await alice.post("/api/v1/tasks", json={"dsl": unknown_kind}), 422)
    assert any(e["code"] == "unknown_kind" and e.get("node_id") == "zz" for e in body["errors"])

    assert_problem(await alice.get("/api/v1/tasks/t_missing"), 404)
    assert_problem(await alice.get("/api/v1/tasks?status=bogus"), 422)
    assert_problem(await alice.get("/api/v1/tasks?limit=0"), 422)
    assert_problem(await alice.get("/api/v1/tasks?cursor=%%%"), 400)
    assert_problem(await alice.get("/api/v1/nowhere"), 404)
    assert_problem(await alice.delete("/api/v1/tasks"), 405)


async def test_malformed_json_reports_the_position_not_a_field(alice: httpx.AsyncClient) -> None:
    body = b'{"dsl": {"version": "1", }}'  # after the stray comma the parse stops at `}`: character 25
    resp = await alice.post("/api/v1/tasks", content=body, headers={"content-type": "application/json"})
    problem = assert_problem(resp, 400)
    assert problem["title"] == "Malformed JSON"
    [error] = problem["errors"]
    assert error["code"] == "json_invalid" and error["position"] == 25 and "field" not in error
    assert "at character 25" in error["message"]


async def test_chunked_oversized_body_is_413(alice: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"dsl": {}, "input": {"text": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}}'

    resp = await alice.post("/api/v1/tasks", content=chunks(), headers={"content-type": "application/json"})
    assert_problem(resp, 413)


async def test_dsl_validate(alice: httpx.AsyncClient) -> None:
    resp = await alice.post("/api/v1/dsl/validate", json=DSL)
    assert resp.status_code == 200 and resp.json()["valid"] is True
    bad = {"version": "9", "nodes": [], "edges": []}
    body = assert_problem(await alice.post("/api/v1/dsl/validate", json=bad), 422)
    assert {"bad_version", "empty_graph"} <= {e["code"] for e in body["errors"]}


# ---- tasks ------------------------------------------------------------------------------------


async def test_submit_publishes_the_task_once_per_idempotency_key(
    gw: EmbeddedGateway, alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    bus = gw.app.state.bus
    headers = {"Idempotency-Key": "k-1"}
    first = await alice.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "a"}}, headers=headers)
    again = await alice.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "a"}}, headers=headers)
    other_user = await bob.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "a"}}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert other_user.json()["id"] != first.json()["id"]

    sub = await queue(bus)
    msgs = await sub.fetch(10, timeout=2)
    messages = [TaskMessage.from_bytes(m.data) for m in msgs]
    assert sorted(m.task_id for m in messages) == sorted([first.json()["id"], other_user.json()["id"]])
    assert {m.headers.get("Nats-Msg-Id") for m in msgs} == {m.task_id for m in messages}
    mine = next(m for m in messages if m.task_id == first.json()["id"])
    assert mine.user_id == "alice" and mine.input == {"text": "a"} and mine.dsl == DSL


async def test_concurrent_same_key_makes_one_task(alice: httpx.AsyncClient) -> None:
    async def post() -> str:
        resp = await alice.post("/api/v1/tasks", json={"dsl": DSL}, headers={"Idempotency-Key": "race"})
        assert resp.status_code == 202, resp.text
        return resp.json()["id"]

    ids = await asyncio.gather(*[post() for _ in range(8)])
    assert len(set(ids)) == 1


async def test_task_lifecycle_follows_events(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    task_id = await submit(alice)
    pub = EventPublisher(gw.app.state.bus, task_id)
    from shared.contract.events import NodeEndEvent, NodeStartEvent, TokenEvent
    from shared.contract.models import Usage

    await pub.emit(StatusEvent(task_id=task_id, status="running", chain_revision=3))
    await pub.emit(NodeStartEvent(task_id=task_id, node_id="ans", kind="agent"))
    await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text="Hel"))
    await pub.emit(
        NodeEndEvent(task_id=task_id, node_id="ans", status="done", duration_ms=12.5, output_preview="Hello")
    )
    usage = Usage(prompt_tokens=10, completion_tokens=5, cost=0.001)
    await pub.emit(StatusEvent(task_id=task_id, status="done"))
    await pub.emit(DoneEvent(task_id=task_id, status="done", output={"out": "Hello"}, usage=usage))
    await pub.flush()
    body = await wait_status(alice, task_id, "done")
    for _ in range(100):
        if body["output"] is not None:
            break
        await asyncio.sleep(0.02)
        body = (await alice.get(f"/api/v1/tasks/{task_id}")).json()
    assert body["output"] == {"out": "Hello"}
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.001}
    assert body["chain_revision"] == 3
    assert body["started_at"] and body["finished_at"]
    nodes = {n["id"]: n for n in body["nodes"]}
    assert nodes["ans"]["status"] == "done" and nodes["ans"]["kind"] == "agent"
    assert nodes["in"]["status"] == "pending"

    async def listed_done() -> bool:  # lists and actions follow the record, which the recorder writes
        done_list = (await alice.get("/api/v1/tasks?status=done")).json()["items"]
        return [t["id"] for t in done_list] == [task_id]

    await eventually(listed_done)
    assert_problem(await alice.post(f"/api/v1/tasks/{task_id}/cancel"), 409)
    assert_problem(await alice.post(f"/api/v1/tasks/{task_id}/retry"), 409)
    assert_problem(await alice.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve"}), 409)


@contextlib.asynccontextmanager
async def recorder_paused(gw: EmbeddedGateway) -> AsyncIterator[Recorder]:
    """The gateway's recorder stopped; the one yielded records what it missed once started."""
    st = gw.app.state
    await st.recorder.stop()
    resumed = Recorder(st.bus, st.db)
    try:
        yield resumed
    finally:
        await resumed.stop()


async def waiting_for_the_record(gw: EmbeddedGateway, task_id: str, readers: int = 1) -> None:
    async def waiting() -> bool:
        return len(gw.app.state.record_watch._waiters.get(task_id, ())) == readers

    await eventually(waiting)


async def test_task_view_is_never_behind_its_stream(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    """A client that read `done` on the stream and then fetches the task sees it done: the view
    waits for the recorder (here: stopped until the view waits) — and writes nothing itself."""
    from shared.contract.events import NodeEndEvent, NodeStartEvent

    async with recorder_paused(gw) as recorder:
        task_id = await submit(alice)
        pub = EventPublisher(gw.app.state.bus, task_id)
        await pub.emit(StatusEvent(task_id=task_id, status="running", chain_revision=4))
        await pub.emit(NodeStartEvent(task_id=task_id, node_id="ans", kind="agent"))
        await pub.emit(NodeEndEvent(task_id=task_id, node_id="ans", status="done", duration_ms=3.0,
                                    output_preview="Hi"))
        await pub.emit(StatusEvent(task_id=task_id, status="done"))
        await pub.emit(DoneEvent(task_id=task_id, status="done", output={"out": "Hi"}))
        await pub.flush()
        viewing = asyncio.create_task(alice.get(f"/api/v1/tasks/{task_id}"))
        await waiting_for_the_record(gw, task_id)
        recorded = await gw.app.state.db.run(lambda s: s.get(Task, task_id))
        assert (recorded.status, recorded.output) == ("submitted", None)  # the reader wrote nothing
        await recorder.start()
        body = (await viewing).json()
    assert body["status"] == "done" and body["output"] == {"out": "Hi"} and body["finished_at"]
    assert body["chain_revision"] == 4
    assert {n["id"]: n["status"] for n in body["nodes"]}["ans"] == "done"
    listed = (await alice.get("/api/v1/tasks?status=done")).json()["items"]
    assert [t["id"] for t in listed] == [task_id]


async def test_many_readers_wait_for_one_recorder(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    from shared.contract.events import NodeEndEvent, NodeStartEvent

    async with recorder_paused(gw) as recorder:
        task_id = await submit(alice)
        pub = EventPublisher(gw.app.state.bus, task_id)
        await pub.emit(StatusEvent(task_id=task_id, status="running"))
        for node in ("in", "ans", "out"):
            await pub.emit(NodeStartEvent(task_id=task_id, node_id=node, kind="tool"))
            await pub.emit(NodeEndEvent(task_id=task_id, node_id=node, status="done", duration_ms=1.0))
        await pub.emit(DoneEvent(task_id=task_id, status="done", output={"out": "ok"}))
        await pub.flush()
        views = [asyncio.create_task(alice.get(f"/api/v1/tasks/{task_id}")) for _ in range(12)]
        await waiting_for_the_record(gw, task_id, readers=12)
        await recorder.start()
        bodies = [(await v).json() for v in views]
    assert {b["status"] for b in bodies} == {"done"}
    assert all({n["status"] for n in b["nodes"]} == {"done"} for b in bodies)


async def test_task_view_of_a_retried_task_waits_for_the_retry_alone(gw: EmbeddedGateway,
                                                                     alice: httpx.AsyncClient) -> None:
    """The first run's ending in the log says nothing about the retry: the view does not wait for
    it; the retry's own ending is waited for."""
    task_id, pub, _ = await failed_task(gw, alice)
    assert (await alice.post(f"/api/v1/tasks/{task_id}/retry")).status_code == 202
    async with recorder_paused(gw) as recorder:
        assert (await alice.get(f"/api/v1/tasks/{task_id}")).json()["status"] == "submitted"
        await pub.emit(StatusEvent(task_id=task_id, status="running", retry=1))
        await pub.emit(StatusEvent(task_id=task_id, status="done"))
        await pub.emit(DoneEvent(task_id=task_id, status="done", output={"out": "second time"}, retry=1))
        await pub.flush()
        viewing = asyncio.create_task(alice.get(f"/api/v1/tasks/{task_id}"))
        await waiting_for_the_record(gw, task_id)
        await recorder.start()
        body = (await viewing).json()
    assert (body["status"], body["retry"], body["error"]) == ("done", 1, None)
    assert body["output"] == {"out": "second time"}


async def test_task_view_stops_waiting_when_the_record_passes_the_event_it_waited_for(
        gw: EmbeddedGateway, alice: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    """A reader waits for `running`; by the time the recorder catches up, the run has gone on to
    wait for an approval and the row says `waiting`: the record is ahead of what the reader waited
    for, not behind it, and the reader answers then (it used to wait out `recorded.WAIT_S`)."""
    async with recorder_paused(gw) as recorder:
        task_id = await submit(alice)
        pub = EventPublisher(gw.app.state.bus, task_id)
        await pub.emit(StatusEvent(task_id=task_id, status="running"))
        await pub.flush()
        viewing = asyncio.create_task(alice.get(f"/api/v1/tasks/{task_id}"))
        await waiting_for_the_record(gw, task_id)
        await pub.emit(StatusEvent(task_id=task_id, status="waiting"))
        await pub.flush()
        with caplog.at_level("WARNING", logger="agentix.gateway.recorded"):
            await recorder.start()
            body = (await viewing).json()
    assert body["status"] == "waiting"
    assert "did not follow its log" not in caplog.text


async def test_pagination_walks_every_task_once(alice: httpx.AsyncClient) -> None:
    created = [await submit(alice) for _ in range(5)]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await alice.get("/api/v1/tasks", params=params)).json()
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(created))


async def test_cancel_of_a_queued_task_ends_it(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    bus: Bus = gw.app.state.bus
    task_id = await submit(alice)
    assert (await bus.js.stream_info(bus.names.tasks_stream)).state.messages == 1
    sub = await bus.nc.subscribe(bus.subjects.cancel(task_id))
    resp = await alice.post(f"/api/v1/tasks/{task_id}/cancel")
    assert resp.status_code == 202
    await bus.nc.flush()
    body = await wait_status(alice, task_id, "cancelled")
    assert body["finished_at"]
    assert json.loads((await sub.next_msg(timeout=2)).data)["by"] == "alice"
    assert (await bus.js.stream_info(bus.names.tasks_stream)).state.messages == 0, "taken off the queue"
    await sub.unsubscribe()


async def test_approval_resumes_the_waiting_node(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    bus: Bus = gw.app.state.bus
    task_id = await submit(alice, APPROVAL_DSL)
    assert_problem(await alice.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve"}), 409)
    pub = EventPublisher(bus, task_id)
    await pub.emit(StatusEvent(task_id=task_id, status="running"))
    await pub.emit(ApprovalRequestEvent(task_id=task_id, node_id="ok", message="go?"))
    await pub.emit(StatusEvent(task_id=task_id, status="waiting"))
    await pub.flush()
    body = await wait_status(alice, task_id, "waiting")
    assert {n["id"]: n["status"] for n in body["nodes"]}["ok"] == "waiting"

    assert_problem(await alice.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "maybe"}), 422)
    wrong = await alice.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve", "node_id": "in"})
    assert_problem(wrong, 409)
    resp = await alice.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve", "comment": "fine"})
    assert resp.status_code == 202 and resp.json()["node_id"] == "ok"

    sub = await queue(bus)
    msgs = await sub.fetch(10, timeout=2)
    [msg] = [m for m in msgs if m.subject == bus.subjects.tasks_resume]
    resume = ResumeMessage.from_bytes(msg.data)
    assert (resume.task_id, resume.node_id, resume.decision, resume.by, resume.comment) == (
        task_id, "ok", "approve", "alice", "fine",
    )  # fmt: skip
    # The dedupe id names the wait: the task's last event when the decision was taken.
    assert msg.headers["Nats-Msg-Id"] == f"{task_id}:resume:ok:{await last_event_n(bus, task_id)}"


async def failed_task(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> tuple[str, EventPublisher, dict[str, Any]]:
    """A task whose first run failed (`model down`), as recorded; and its event publisher."""
    task_id = await submit(alice)
    pub = EventPublisher(gw.app.state.bus, task_id)
    await pub.emit(StatusEvent(task_id=task_id, status="running"))
    await pub.emit(StatusEvent(task_id=task_id, status="failed", error="model down", code="unavailable"))
    await pub.emit(DoneEvent(task_id=task_id, status="failed", error="model down", code="unavailable"))
    await pub.flush()
    return task_id, pub, await wait_status(alice, task_id, "failed")


async def test_retry_reopens_a_failed_task(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    bus: Bus = gw.app.state.bus
    task_id, pub, failed = await failed_task(gw, alice)
    assert failed["error"] == "model down" and failed["error_code"] == "unavailable"

    resp = await alice.post(f"/api/v1/tasks/{task_id}/retry")
    assert resp.status_code == 202 and resp.json()["retry"] == 1
    body = (await alice.get(f"/api/v1/tasks/{task_id}")).json()
    assert body["status"] == "submitted" and body["error"] is None

    sub = await queue(bus)
    msgs = await sub.fetch(10, timeout=2)
    ids = [m.headers["Nats-Msg-Id"] for m in msgs]
    assert ids == [task_id, f"{task_id}:retry:1"]
    assert TaskMessage.from_bytes(msgs[1].data).retry == 1

    # A stale event of the first run does not undo the retry; the new run moves the record.
    await pub.emit(StatusEvent(task_id=task_id, status="failed", error="late", retry=0))
    await pub.emit(StatusEvent(task_id=task_id, status="running", retry=1))
    await pub.flush()
    body = await wait_status(alice, task_id, "running")
    assert body["error"] is None and body["retry"] == 1


# ---- workflows --------------------------------------------------------------------------------


async def test_workflow_crud_and_run_by_id(alice: httpx.AsyncClient, bob: httpx.AsyncClient) -> None:
    assert_problem(await alice.post("/api/v1/workflows", json={"name": "bad", "dsl": {"version": "1"}}), 422)
    created = await alice.post("/api/v1/workflows", json={"name": "qa", "dsl": DSL})
    assert created.status_code == 201
    wf_id = created.json()["id"]
    assert (await alice.get(f"/api/v1/workflows/{wf_id}")).json()["dsl"] == DSL
    assert [w["id"] for w in (await alice.get("/api/v1/workflows")).json()["items"]] == [wf_id]
    assert_problem(await bob.get(f"/api/v1/workflows/{wf_id}"), 404)
    assert_problem(await bob.post("/api/v1/tasks", json={"workflow_id": wf_id}), 404)

    renamed = await alice.put(f"/api/v1/workflows/{wf_id}", json={"name": "qa2", "dsl": APPROVAL_DSL})
    assert renamed.json()["name"] == "qa2"
    run = await alice.post("/api/v1/tasks", json={"workflow_id": wf_id, "input": {"text": "x"}})
    assert run.status_code == 202
    task = (await alice.get(f"/api/v1/tasks/{run.json()['id']}")).json()
    assert task["workflow_id"] == wf_id
    assert [n["id"] for n in task["nodes"]] == ["in", "ok", "out"]

    assert (await alice.delete(f"/api/v1/workflows/{wf_id}")).status_code == 204
    assert_problem(await alice.get(f"/api/v1/workflows/{wf_id}"), 404)


async def test_every_save_of_a_workflow_is_a_version_with_its_layout(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    layout = {"in": {"x": 0, "y": 0}, "ans": {"x": 240, "y": 0}, "out": {"x": 480, "y": 0}}
    made = (await alice.post("/api/v1/workflows", json={"name": "v", "dsl": DSL, "layout": layout})).json()
    assert made["version"] == 1
    wf = f"/api/v1/workflows/{made['id']}"
    again = (await alice.put(wf, json={"name": "v", "dsl": APPROVAL_DSL})).json()
    assert again["version"] == 2
    got = (await alice.get(wf)).json()
    assert (got["version"], got["layout"], got["dsl"]) == (2, None, APPROVAL_DSL)
    listed = (await alice.get(f"{wf}/versions")).json()["items"]
    assert [(v["version"], v["nodes"]) for v in listed] == [(2, 3), (1, 3)]
    first = (await alice.get(f"{wf}/versions/1")).json()
    assert (first["dsl"], first["layout"], first["created_by"]) == (DSL, layout, "alice")
    assert_problem(await alice.get(f"{wf}/versions/9"), 404)
    assert_problem(await bob.get(f"{wf}/versions"), 404)
    assert_problem(await bob.get(f"{wf}/versions/1"), 404)
    # Restoring is saving an old version again: the history grows, nothing is lost.
    restored = (await alice.put(wf, json={"name": "v", "dsl": first["dsl"], "layout": first["layout"]})).json()
    assert restored["version"] == 3 and (await alice.get(wf)).json()["layout"] == layout
    assert (await alice.delete(wf)).status_code == 204
    assert_problem(await alice.get(f"{wf}/versions/1"), 404)


async def test_dsl_kinds_lists_every_kind_with_its_config_schema(alice: httpx.AsyncClient) -> None:
    kinds = (await alice.get("/api/v1/dsl/kinds")).json()["kinds"]
    by_kind = {k["kind"]: k for k in kinds}
    assert list(by_kind) == ["input", "retriever", "agent", "tool", "branch", "map", "coordinator", "dual", "approval",
                             "output"]
    assert by_kind["agent"]["config_schema"]["required"] == ["prompt"]
    assert by_kind["branch"]["outputs"] == ["true", "false"]
    assert by_kind["input"]["config_schema"]["properties"]["schema"]  # the DSL's name, not the model's


# ---- cross-cutting ------------------------------------------------------------------------------


async def test_trace_context_travels_from_http_into_the_task_message(
    gw: EmbeddedGateway, alice: httpx.AsyncClient
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    incoming = f"00-{trace_id}-00f067aa0ba902b7-01"
    resp = await alice.post("/api/v1/tasks", json={"dsl": DSL}, headers={"traceparent": incoming})
    assert resp.status_code == 202
    bus: Bus = gw.app.state.bus
    [msg] = await (await queue(bus)).fetch(1, timeout=2)
    assert msg.headers["traceparent"].split("-")[1] == trace_id


async def test_cors_allows_only_configured_origins(settings: Settings) -> None:
    configured = settings.model_copy(update={"cors_origins": ["https://canvas.example"]})
    gateway = await EmbeddedGateway(configured).start()
    try:
        async with httpx.AsyncClient(base_url=gateway.url) as c:
            preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
            ok = await c.options("/api/v1/tasks", headers={"Origin": "https://canvas.example", **preflight})
            assert ok.status_code == 200
            assert ok.headers["access-control-allow-origin"] == "https://canvas.example"
            other = await c.options("/api/v1/tasks", headers={"Origin": "https://evil.example", **preflight})
            assert "access-control-allow-origin" not in other.headers
    finally:
        await gateway.stop()


async def test_task_records_on_postgres(settings: Settings, pg_url: str) -> None:
    gateway = await EmbeddedGateway(settings.model_copy(update={"gateway_db_url": pg_url})).start()
    try:
        async with httpx.AsyncClient(base_url=gateway.url, headers=bearer(settings, "pg-user")) as c:
            first = await c.post("/api/v1/tasks", json={"dsl": DSL}, headers={"Idempotency-Key": "pg"})
            again = await c.post("/api/v1/tasks", json={"dsl": DSL}, headers={"Idempotency-Key": "pg"})
            task_id = first.json()["id"]
            assert again.json()["id"] == task_id
            pub = EventPublisher(gateway.app.state.bus, task_id)
            await pub.emit(StatusEvent(task_id=task_id, status="running"))
            await pub.emit(DoneEvent(task_id=task_id, status="done", output="ok"))
            await pub.flush()
            body = await wait_status(c, task_id, "done")
            assert body["output"] == "ok"
            listed = (await c.get("/api/v1/tasks", params={"status": "done"})).json()["items"]
            assert [t["id"] for t in listed] == [task_id]
    finally:
        await gateway.stop()
