"""`/mcp` against DNS rebinding and for clients that discover how to authenticate: a foreign
`Origin` or `Host` is a 403 before the token is looked at, local and configured ones are served,
a 401 points at the protected-resource metadata (RFC 9728), which names the resource."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.settings import Settings

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture
async def gateway(settings: Settings) -> AsyncIterator[tuple[Settings, str]]:
    cfg = settings.model_copy(update={
        "mcp_allowed_origins": ["https://app.example.org"],
        "mcp_allowed_hosts": ["agentix.example.org", "mcp.example.org:*"],
        "mcp_authorization_servers": ["https://login.example.org"],
    })
    running = await EmbeddedGateway(cfg).start()
    try:
        yield cfg, running.url
    finally:
        await running.stop()


def headers(cfg: Settings, **extra: str) -> dict[str, str]:
    return {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {mint_token(cfg, 'alice')}",
        **extra,
    }


async def test_a_foreign_origin_or_host_is_refused_before_anything_else(gateway: tuple[Settings, str]) -> None:
    cfg, url = gateway
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        evil = await http.post("/mcp", json=PING, headers=headers(cfg, Origin="http://evil.example.com"))
        assert evil.status_code == 403, evil.text
        assert "evil.example.com" in evil.json()["detail"]
        rebound = await http.post("/mcp", json=PING, headers=headers(cfg, Host="evil.example.com"))
        assert rebound.status_code == 403 and "Host" in rebound.json()["detail"]
        # without a token too: the refusal does not depend on who asks
        bare = await http.post("/mcp", json=PING, headers={"Origin": "http://evil.example.com"})
        assert bare.status_code == 403


@pytest.mark.parametrize("extra", [
    {},  # not a browser: no Origin
    {"Origin": "http://localhost:5173"},
    {"Origin": "http://127.0.0.1"},
    {"Origin": "https://app.example.org"},
    {"Host": "agentix.example.org"},
    {"Host": "mcp.example.org:8443", "Origin": "https://app.example.org"},
    {"Host": "[::1]:8000"},
])
async def test_local_and_configured_origins_and_hosts_are_served(
    gateway: tuple[Settings, str], extra: dict[str, str]
) -> None:
    cfg, url = gateway
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        answered = await http.post("/mcp", json=PING, headers=headers(cfg, **extra))
        assert answered.status_code == 200 and answered.json()["result"] == {}, answered.text


async def test_a_401_points_at_the_protected_resource_metadata(gateway: tuple[Settings, str]) -> None:
    _, url = gateway
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        refused = await http.post("/mcp", json=PING, headers={"Accept": "application/json, text/event-stream"})
        assert refused.status_code == 401
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
        where = challenge.split('resource_metadata="', 1)[1].rstrip('"')
        assert where == f"{url}/.well-known/oauth-protected-resource/mcp"
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            meta = await http.get(path)
            assert meta.status_code == 200, meta.text
            body = meta.json()
            assert body["resource"] == f"{url}/mcp"
            assert body["authorization_servers"] == ["https://login.example.org"]
            assert body["bearer_methods_supported"] == ["header"]


async def test_the_token_may_come_as_an_api_key(gateway: tuple[Settings, str]) -> None:
    cfg, url = gateway
    key = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
           "X-API-Key": mint_token(cfg, "alice")}  # fmt: skip
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        answered = await http.post("/mcp", json=PING, headers=key)
        assert answered.status_code == 200 and answered.json()["result"] == {}, answered.text
        forged = await http.post("/mcp", json=PING, headers={**key, "X-API-Key": "not-a-jwt"})
        assert forged.status_code == 401
