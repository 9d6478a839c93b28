"""`/mcp` serving a handshake-era POST of one request in its own task (`single_exchange`): each
answer is, byte for byte, the SDK's transport's answer to the same request, and what that path
leaves to the transport (the handshake, notifications, batches, bad bodies and headers) is still
answered by it. The real SDK client's calls on this road are in test_mcp_server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from services.gateway.protocols.mcp import single_exchange
from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.test_tools_support import tools_and_gateway

WIRE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
REQUESTS: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    {"jsonrpc": "2.0", "id": "two", "method": "tools/call", "params": {"name": "kb_list", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_get", "arguments": {"key": "x"}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "kb_list", "arguments": "not an object"}},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call"},
    {"jsonrpc": "2.0", "id": 7, "method": "no/such/method", "params": {}},
    {"jsonrpc": "2.0", "id": 8, "method": "ping"},
]


@pytest.fixture
async def http(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with tools_and_gateway(settings) as (cfg, _bus, _tools, base_url):
        token = mint_token(cfg, "alice")
        async with httpx.AsyncClient(base_url=base_url.removesuffix("/api/v1"), timeout=30,
                                     headers={"Authorization": f"Bearer {token}"}) as client:  # fmt: skip
            yield client


@pytest.fixture
def served_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods the single-exchange path served (its calls of the SDK's `serve_one`)."""
    methods: list[str] = []
    serve_one = single_exchange.serve_one

    def counted(server: Any, dctx: Any, method: str, *args: Any, **kwargs: Any) -> Awaitable[dict[str, Any]]:
        methods.append(method)
        return serve_one(server, dctx, method, *args, **kwargs)

    monkeypatch.setattr(single_exchange, "serve_one", counted)
    return methods


async def answer(http: httpx.AsyncClient, body: Any, headers: dict[str, str]) -> tuple[int, str, Any]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await http.post("/mcp", content=content, headers=headers)
    return response.status_code, response.headers.get("content-type", ""), response.json() if response.content else None


async def test_one_request_is_answered_as_the_sdks_transport_answers_it(
    http: httpx.AsyncClient, served_here: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    here = []
    for request in REQUESTS:
        here.append(await answer(http, request, WIRE))
        assert served_here and served_here[-1] == request["method"], request
    with monkeypatch.context() as patched:  # every request left to the transport
        patched.setattr(single_exchange, "_eligible", lambda request: None)
        by_transport = [await answer(http, request, WIRE) for request in REQUESTS]
    assert len(served_here) == len(REQUESTS)
    for request, ours, theirs in zip(REQUESTS, here, by_transport, strict=True):
        assert ours == theirs, request
    outcomes = {request["id"]: (await answer(http, request, WIRE))[2] for request in REQUESTS}
    assert [tool["name"] for tool in outcomes[1]["result"]["tools"]]  # the listing
    assert outcomes["two"]["result"]["structuredContent"] == {"items": []}
    assert outcomes[3]["result"]["isError"] is True  # a tool's failure is a result
    assert outcomes[4]["result"]["content"][0]["text"] == "unknown_tool: Unknown tool: no_such_tool"
    assert outcomes[5]["error"]["code"] == -32602 and outcomes[6]["error"]["code"] == -32602  # invalid params
    assert outcomes[7]["error"]["code"] == -32601  # method not found
    assert outcomes[8] == {"jsonrpc": "2.0", "id": 8, "result": {}}


async def test_the_rest_is_left_to_the_sdks_transport(http: httpx.AsyncClient, served_here: list[str]) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    status, _, body = await answer(http, initialize, WIRE)
    assert status == 200 and body["result"]["protocolVersion"] == "2025-11-25"
    assert body["result"]["serverInfo"]["name"] == "agentix"
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    cases: list[tuple[Any, dict[str, str], Callable[[int, Any], bool]]] = [
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, WIRE, lambda s, b: s == 202 and b is None),
        ([ping, ping], WIRE, lambda s, b: s == 400),  # a batch
        (b'{"jsonrpc": "2.0", "id": 3, "method": "ping"', WIRE, lambda s, b: s == 400 and b["error"]["code"] == -32700),
        ({"jsonrpc": "2.0", "id": "x", "method": 7}, WIRE, lambda s, b: s == 400),  # not a request
        (ping, {**WIRE, "Accept": "text/event-stream"}, lambda s, b: s == 406),
        (ping, {**WIRE, "Content-Type": "text/plain"}, lambda s, b: s == 415),
        ({**ping, "params": {"_meta": {"pad": "x" * (1 << 20)}}}, WIRE, lambda s, b: s == 413),  # over 1 MiB
    ]
    for body, headers, expected in cases:
        status, _, answered = await answer(http, body, headers)
        assert expected(status, answered), (body, headers, status, answered)
    assert served_here == []
    # Without the version header the transport's default version applies: also the transport's.
    status, _, answered = await answer(http, ping, {k: v for k, v in WIRE.items() if k != "MCP-Protocol-Version"})
    assert status == 200 and answered["result"] == {} and served_here == []
