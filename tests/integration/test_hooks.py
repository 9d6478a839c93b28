"""Inbound webhooks over a real gateway, NATS and dispatcher: a call signed by the real
`standardwebhooks` library starts exactly one task of the hook's workflow with the mapped input;
each kind of bad call (bad, missing or stale signature, replayed delivery id, disabled hook,
body too large, not JSON, a mapping that finds nothing) is refused with a problem that says why
and starts nothing; GitHub-style signatures; the hooks' CRUD and ownership."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from services.gateway.embedded import EmbeddedGateway
from services.gateway.triggers.signing import github_signature
from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.support.dispatcher import dispatcher
from tests.support.wait import eventually

ECHO: dict[str, Any] = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}/{{ in.ref }}"}},
    ],
    "edges": [{"source": "in", "target": "out"}],
}
MAPPING = {"text": "$.body.order.note", "ref": "$.query.ref"}


def bearer(settings: Settings, user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {mint_token(settings, user)}"}


@pytest.fixture
async def gw(settings: Settings) -> AsyncIterator[EmbeddedGateway]:
    gateway = await EmbeddedGateway(settings.model_copy(update={
        "rate_limit_per_min": 100_000, "hook_body_max_bytes": 4096})).start()
    try:
        async with dispatcher(gateway.settings), httpx.AsyncClient(base_url=gateway.url) as probe:
            # ready: a dispatcher has started (it is not stopped mid-start when a test ends quickly)
            await eventually(lambda: _ready(probe), attempts=1500)
            yield gateway
    finally:
        await gateway.stop()


async def _ready(probe: httpx.AsyncClient) -> bool:
    return (await probe.get("/ready")).status_code == 200


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "alice"), timeout=30) as c:
        yield c


async def make_hook(client: httpx.AsyncClient, **extra: Any) -> dict[str, Any]:
    wf = await client.post("/api/v1/workflows", json={"name": "echo", "dsl": ECHO})
    assert wf.status_code == 201, wf.text
    resp = await client.post("/api/v1/hooks", json={"name": "orders", "workflow_id": wf.json()["id"],
                                                    "input_mapping": MAPPING, **extra})  # fmt: skip
    assert resp.status_code == 201, resp.text
    return resp.json()


def signed(secret: str, body: bytes, msg_id: str | None = None, at: datetime | None = None) -> dict[str, str]:
    """Headers made by the Standard Webhooks reference library, as a sender would."""
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    at = at or datetime.now(UTC)
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": Webhook(secret).sign(msg_id, at, body), "content-type": "application/json"}


async def task_count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/api/v1/tasks", params={"limit": 200})).json()["items"])


async def ended(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        task = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        return task if task["status"] in ("done", "failed") else None

    return await eventually(done, attempts=1500)


async def test_a_signed_call_starts_one_task_with_the_mapped_input_and_a_replay_starts_nothing(
        alice: httpx.AsyncClient) -> None:  # fmt: skip
    hook = await make_hook(alice)
    assert hook["secret"].startswith("whsec_") and hook["url"] == f"/hooks/{hook['id']}"
    body = json.dumps({"order": {"note": "two lamps"}}).encode()
    headers = signed(hook["secret"], body, msg_id="evt_1")
    resp = await alice.post(f"/hooks/{hook['id']}", params={"ref": "r9"}, content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    task_id = resp.json()["task_id"]
    assert resp.json()["delivery_id"] == "evt_1"
    task = await ended(alice, task_id)
    assert task["status"] == "done" and task["output"] == {"out": "two lamps/r9"}
    assert task["trigger"] == {"kind": "hook", "id": hook["id"], "delivery_id": "evt_1"}
    listed = (await alice.get("/api/v1/tasks")).json()["items"]
    assert [t["trigger"] for t in listed] == [task["trigger"]]

    again = await alice.post(f"/hooks/{hook['id']}", params={"ref": "r9"}, content=body, headers=headers)
    assert again.status_code == 409
    assert again.headers["content-type"].startswith("application/problem+json")
    assert again.json()["task_id"] == task_id and "already accepted" in again.json()["detail"]
    # re-signed with a fresh timestamp, the same delivery id is still the same delivery
    resigned = await alice.post(f"/hooks/{hook['id']}", params={"ref": "r9"}, content=body,
                                headers=signed(hook["secret"], body, msg_id="evt_1"))  # fmt: skip
    assert resigned.status_code == 409
    assert await task_count(alice) == 1
    view = (await alice.get(f"/api/v1/hooks/{hook['id']}")).json()
    assert view["calls"] == 1 and "secret" not in view


async def test_each_bad_call_is_refused_says_why_and_starts_nothing(alice: httpx.AsyncClient) -> None:
    hook = await make_hook(alice)
    url = f"/hooks/{hook['id']}"
    body = json.dumps({"order": {"note": "x"}}).encode()
    other = Webhook("whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY")
    cases: list[tuple[str, dict[str, str], bytes, int, str]] = [
        ("wrong secret", {**signed(hook["secret"], body), "webhook-signature":
                          other.sign("m1", datetime.now(UTC), body)}, body, 401, "does not match"),
        ("body changed", signed(hook["secret"], body), body + b" ", 401, "does not match"),
        ("no signature", {"content-type": "application/json"}, body, 401, "missing webhook-id"),
        ("stale", signed(hook["secret"], body, at=datetime.now(UTC) - timedelta(minutes=6)), body, 401, "stale"),
        ("too large", signed(hook["secret"], b"x" * 5000), b"x" * 5000, 413, "at most 4096 bytes"),
        ("not json", signed(hook["secret"], b"<xml/>"), b"<xml/>", 415, "must be JSON"),
        ("mapping finds nothing", signed(hook["secret"], b'{"order": {}}'), b'{"order": {}}', 422,
         "$.body.order.note finds nothing"),
    ]
    for name, headers, content, status, why in cases:
        resp = await alice.post(url, params={"ref": "r"}, content=content, headers=headers)
        assert resp.status_code == status, (name, resp.text)
        assert resp.headers["content-type"].startswith("application/problem+json"), name
        assert why in resp.json()["detail"], (name, resp.json())
    assert (await alice.post("/hooks/hk_nope", content=body, headers=signed(hook["secret"], body))).status_code == 404
    off = await alice.patch(f"/api/v1/hooks/{hook['id']}", json={"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False
    disabled = await alice.post(url, params={"ref": "r"}, content=body, headers=signed(hook["secret"], body))
    assert disabled.status_code == 409 and "disabled" in disabled.json()["detail"]
    assert await task_count(alice) == 0
    assert (await alice.get(f"/api/v1/hooks/{hook['id']}")).json()["calls"] == 0


async def test_github_style_signature_and_delivery_id(alice: httpx.AsyncClient) -> None:
    mapping = {"text": "$.body.note", "ref": "$.headers.x-github-event"}
    hook = await make_hook(alice, signature="github", input_mapping=mapping)
    body = b'{"note": "pushed"}'
    headers = {"x-hub-signature-256": github_signature(hook["secret"], body), "x-github-delivery": "d-1",
               "x-github-event": "push", "content-type": "application/json"}
    resp = await alice.post(f"/hooks/{hook['id']}", content=body, headers=headers)
    assert resp.status_code == 202, resp.text
    task = await ended(alice, resp.json()["task_id"])
    assert task["output"] == {"out": "pushed/push"}
    assert task["trigger"] == {"kind": "hook", "id": hook["id"], "delivery_id": "d-1"}
    assert (await alice.post(f"/hooks/{hook['id']}", content=body, headers=headers)).status_code == 409
    bad = {**headers, "x-hub-signature-256": github_signature("nope", body), "x-github-delivery": "d-2"}
    assert (await alice.post(f"/hooks/{hook['id']}", content=body, headers=bad)).status_code == 401
    assert await task_count(alice) == 1


async def test_hooks_crud_ownership_and_refusals(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    hook = await make_hook(alice)
    listed = (await alice.get("/api/v1/hooks")).json()["items"]
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "bob"), timeout=30) as bob:
        assert (await bob.get(f"/api/v1/hooks/{hook['id']}")).status_code == 404
        assert (await bob.get("/api/v1/hooks")).json()["items"] == []
        assert (await bob.delete(f"/api/v1/hooks/{hook['id']}")).status_code == 404
    bad_path = await alice.post("/api/v1/hooks", json={"name": "x", "workflow_id": hook["workflow_id"],
                                                       "input_mapping": {"text": "body.x"}})  # fmt: skip
    assert bad_path.status_code == 422 and "must start with $" in bad_path.text
    no_wf = await alice.post("/api/v1/hooks", json={"name": "x", "workflow_id": "wf_nope"})
    assert no_wf.status_code == 422 and "workflow_id" in no_wf.text
    loopback = await alice.post("/api/v1/hooks", json={"name": "x", "workflow_id": hook["workflow_id"],
                                                       "webhook": "http://127.0.0.1:9/cb"})  # fmt: skip
    assert loopback.status_code == 422 and "private or loopback" in loopback.text
    unknown = await alice.patch(f"/api/v1/hooks/{hook['id']}", json={"colour": "red"})
    assert unknown.status_code == 422 and "colour" in unknown.text
    assert (await alice.patch(f"/api/v1/hooks/{hook['id']}", json={"name": None})).status_code == 422
    assert (await alice.delete(f"/api/v1/hooks/{hook['id']}")).status_code == 204
    assert (await alice.get(f"/api/v1/hooks/{hook['id']}")).status_code == 404
