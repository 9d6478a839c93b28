"""API keys against two real gateway replicas on one NATS and one PostgreSQL database, with a
dispatcher and the scripted model: a key made over `/api/v1/keys` is used by the real `openai` SDK
(`/v1`), `langgraph_sdk` (`/lg`, its `api_key`), the `mcp` client (`/mcp`) and plain HTTP
(`/api/v1`); a revoked key is refused at once on both replicas; an expired key is refused; scopes
close doors; bad input is a problem; last uses are written in batches; the acting key is audited."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import openai
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError, PermissionDeniedError
from openai import AsyncOpenAI
from sqlalchemy import update

from agentix.cli import main
from services.gateway.embedded import EmbeddedGateway
from services.gateway.tables import ApiKey
from shared.auth_tokens import mint_token
from tests.conftest import make_settings
from tests.integration.chat_support import ChatStack, chat_stack
from tests.integration.test_mcp_server import by_name, mcp_session
from tests.support import openai_server as oai
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

PG_TABLE = ApiKey.__table__  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
async def srv() -> AsyncIterator[oai.OpenAIServer]:
    async with oai.OpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory, pg_url: str,
                srv: oai.OpenAIServer) -> AsyncIterator[ChatStack]:
    settings = make_settings(nats_server.url, tmp_path_factory.mktemp("keys") / "data", llm_base_url=srv.url,
                             llm_model="m", llm_api_key="k", llm_retry_attempts=1, gateway_db_url=pg_url)
    async with chat_stack(settings, replicas=2) as chat:
        yield chat


async def make_key(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/api/v1/keys", json={"name": f"k-{uuid.uuid4().hex[:6]}", **body})
    assert resp.status_code == 201, resp.text
    return resp.json()


def with_key(gateway: EmbeddedGateway, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=gateway.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


async def test_a_key_works_on_every_door_with_the_real_clients(stack: ChatStack, srv: oai.OpenAIServer) -> None:
    user = f"u{uuid.uuid4().hex[:6]}"
    owner = await stack.client(user)
    made = await make_key(owner, name="laptop", expires_in="90d")
    key = made["key"]
    assert key.startswith("agx_") and made["prefix"] == key[:12]
    assert made["scopes"] == ["chat", "mcp", "api"]  # all a user may have: no admin
    assert made["expires_at"] is not None and made["last_used_at"] is None

    srv.reset()
    srv.script([oai.reply("Hello from a key.")])
    async with AsyncOpenAI(base_url=f"{stack.gateways[1].url}/v1", api_key=key, max_retries=0, timeout=90) as ai:
        completion = await ai.chat.completions.create(
            model="agentix-direct", messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "Hello from a key."
    async with AsyncOpenAI(base_url=f"{stack.gateways[1].url}/v1", api_key="agx_not-a-key", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            await bad.models.list()

    lg = get_client(url=stack.gateways[0].url + "/lg", api_key=key)  # sent as `x-api-key`
    thread = await lg.threads.create()
    assert (await lg.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
    with pytest.raises(AuthenticationError):
        await get_client(url=stack.gateways[0].url + "/lg", api_key="agx_wrong").threads.create()

    async with with_key(stack.gateways[1], key) as plain:  # `/lg` takes it as `Authorization` too
        assert (await plain.get(f"/lg/threads/{thread['thread_id']}")).status_code == 200

    async with mcp_session(f"{stack.gateways[0].url}/mcp", key) as session:
        assert isinstance(by_name(await session.list_tools()), dict)

    async with with_key(stack.gateways[0], key) as api:
        listed = (await api.get("/api/v1/keys")).json()["items"]
        assert [k["id"] for k in listed] == [made["id"]]
        assert "key" not in listed[0] and "hash" not in listed[0]  # shown once, never again
        assert (await api.get("/api/v1/users/me")).json()["id"] == user
        # What a key did is audited with the key; the key's own creation with the token.
        conversation = await api.post("/api/v1/conversations", json={})
        assert conversation.status_code == 201

    # Last uses are batched: written when a replica flushes (a list flushes its own replica's).
    for gateway in stack.gateways:
        await gateway.app.state.api_keys.flush()  # type: ignore[union-attr]
    listed = (await owner.get("/api/v1/keys")).json()["items"]
    assert listed[0]["last_used_at"] is not None

    admin = await stack.client("keys-admin", admin=True)
    audit = (await admin.get("/api/v1/admin/audit", params={"user_id": user, "limit": 50})).json()["items"]
    by_route = {(row["method"], row["route"]): row for row in audit}
    assert by_route[("POST", "/api/v1/conversations")]["key_id"] == made["id"]
    assert by_route[("POST", "/api/v1/keys")]["key_id"] is None
    assert by_route[("POST", "/api/v1/keys")]["target"] == f"key={made['id']}"
    assert by_route[("POST", "/v1/chat/completions")]["key_id"] == made["id"]


async def test_a_revoked_key_is_refused_at_once_on_both_replicas(stack: ChatStack) -> None:
    owner = await stack.client()
    made = await make_key(owner)
    a, b = stack.gateways
    # Each replica must know the other to wait for its confirmation.
    for gateway in (a, b):
        await eventually(_sees_gateways(gateway, 2))
    async with with_key(a, made["key"]) as on_a, with_key(b, made["key"]) as on_b:
        assert (await on_a.get("/api/v1/keys")).status_code == 200
        assert (await on_b.get("/api/v1/keys")).status_code == 200
        lookups_b = b.app.state.api_keys.lookups  # type: ignore[union-attr]
        assert (await on_b.get("/api/v1/keys")).status_code == 200
        assert b.app.state.api_keys.lookups == lookups_b, "a verified key is kept, not read again"  # type: ignore[union-attr]

        revoked = await owner.delete(f"/api/v1/keys/{made['id']}")
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["revoked_at"] is not None
        assert revoked.json()["gateways_confirmed"] == 2
        for client in (on_b, on_a):
            refused = await client.get("/api/v1/keys")
            assert refused.status_code == 401
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["detail"] == "The API key was revoked."
    assert (await owner.delete(f"/api/v1/keys/{made['id']}")).status_code == 200  # again: no change
    other = await stack.client()
    assert (await other.delete(f"/api/v1/keys/{made['id']}")).status_code == 404  # not theirs


def _sees_gateways(gateway: EmbeddedGateway, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return len(gateway.app.state.instances.live("gateway")) >= count  # type: ignore[union-attr]
    return check


async def test_an_expired_key_is_refused(stack: ChatStack) -> None:
    owner = await stack.client()
    made = await make_key(owner, expires_in="1m")
    gateway = stack.gateways[0]
    st = gateway.app.state  # type: ignore[union-attr]

    def expire(session: Any) -> None:
        session.execute(update(PG_TABLE).where(PG_TABLE.c.id == made["id"])
                        .values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))

    await st.db.run(expire)
    async with with_key(gateway, made["key"]) as api:
        refused = await api.get("/api/v1/keys")
    assert refused.status_code == 401
    assert refused.json()["detail"] == "The API key has expired."


async def test_scopes_close_doors_and_bad_input_is_a_problem(stack: ChatStack, srv: oai.OpenAIServer) -> None:
    root = await stack.client("keys-root", admin=True)
    chat_only = await make_key(root, scopes=["chat"])
    assert chat_only["scopes"] == ["chat"]
    gateway = stack.gateways[0]
    srv.reset()
    srv.script([oai.reply("chat works")])
    async with AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=chat_only["key"], max_retries=0, timeout=90) as ai:
        completion = await ai.chat.completions.create(model="agentix-direct",
                                                      messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "chat works"
    async with with_key(gateway, chat_only["key"]) as api:
        for path in ("/api/v1/admin/status", "/api/v1/keys"):
            refused = await api.get(path)
            assert refused.status_code == 403, path
            assert refused.json()["type"].endswith("insufficient_scope")
        mcp = await api.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                             headers={"Accept": "application/json, text/event-stream"})
        assert mcp.status_code == 403

    mcp_only = await make_key(root, scopes=["mcp"])
    async with mcp_session(f"{gateway.url}/mcp", mcp_only["key"]) as session:
        assert isinstance(by_name(await session.list_tools()), dict)
    async with AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=mcp_only["key"], max_retries=0) as ai:
        with pytest.raises(openai.PermissionDeniedError):
            await ai.models.list()
    with pytest.raises(PermissionDeniedError):
        await get_client(url=gateway.url + "/lg", api_key=mcp_only["key"]).threads.create()

    api_key = await make_key(root, scopes=["api"])  # an admin's key without `admin`: no admin routes
    async with with_key(gateway, api_key["key"]) as api:
        assert (await api.get("/api/v1/admin/status")).status_code == 403
        assert (await api.get("/api/v1/keys")).status_code == 200
        beyond = await api.post("/api/v1/keys", json={"name": "more", "scopes": ["admin"]})
        assert beyond.status_code == 403  # a key makes keys with at most its own scopes
    admin_key = await make_key(root, scopes=["api", "admin"])
    async with with_key(gateway, admin_key["key"]) as api:
        assert (await api.get("/api/v1/admin/status")).status_code == 200

    user = await stack.client()
    assert (await user.post("/api/v1/keys", json={"name": "x", "scopes": ["admin"]})).status_code == 403
    for body, field in (({"name": "x", "scopes": ["root"]}, "scopes"),
                        ({"name": "x", "expires_in": "soon"}, "expires_in"),
                        ({"name": "x", "expires_in": "0d"}, "expires_in"),
                        ({"name": "x", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
                        ({"name": "x", "scopes": []}, "scopes")):
        bad = await user.post("/api/v1/keys", json=body)
        assert bad.status_code == 400, (body, bad.text)
        assert bad.headers["content-type"].startswith("application/problem+json")
        assert bad.json()["errors"][0]["field"] == field
    assert (await user.post("/api/v1/keys", json={"name": "x", "ttl": "9d"})).status_code in (400, 422)


async def test_the_cli_makes_lists_and_revokes_keys(stack: ChatStack, capsys: pytest.CaptureFixture[str]) -> None:
    gateway = stack.gateways[0]
    token = mint_token(stack.settings, "cli-user")
    server = ["--url", gateway.url, "--token", token]

    async def cli(*argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["key", *argv, *server])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = await cli("create", "--name", "ci", "--expires", "90d", "--scope", "chat")
    assert code == 0, err
    key = out.strip()
    assert key.startswith("agx_") and "not shown again" in err
    async with with_key(gateway, key) as api:  # chat only: not the API
        assert (await api.get("/api/v1/keys")).status_code == 403
    code, out, err = await cli("list")
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:4] == ["ID", "NAME", "PREFIX", "SCOPES"]
    key_id, name, prefix, scopes = row.split()[:4]
    assert (name, prefix, scopes) == ("ci", key[:12], "chat")
    assert key not in out
    code, out, err = await cli("revoke", key_id)
    assert code == 0, err
    assert out.startswith(f"key {key_id} revoked")
    lg = get_client(url=gateway.url + "/lg", api_key=key)
    with pytest.raises(AuthenticationError):
        await lg.threads.create()
    code, out, err = await cli("create", "--name", "x", "--expires", "soon")
    assert code == 1 and "expires_in" in err
