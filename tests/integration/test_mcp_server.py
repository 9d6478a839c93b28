"""`/mcp` with the real MCP SDK client against a real gateway and both tool services: the tool
list (true annotations, no injected parameters, high-risk tools only for admins), calls as a user
(never reaching another user's data), tool errors as `isError`, and no token refused."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.gateway.access.principal import Principal
from services.gateway.embedded import EmbeddedGateway
from services.gateway.protocols.mcp.catalog import ToolCatalog
from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.test_tools_support import InProcess, Tools, connected, tools_and_gateway
from tests.support.wait import eventually


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str | None, *, modern: bool = False) -> AsyncIterator[ClientSession]:
    """A client session: the handshake era (`initialize`) or, `modern`, the 2026-07-28 protocol
    (`server/discover`, every request self-contained)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        if modern:
            await session.discover()
        else:
            await session.initialize()
        yield session


class Mcp:
    def __init__(self, settings: Settings, gateway: str, tools: Tools) -> None:
        self.settings, self.gateway, self.tools = settings, gateway, tools
        self.url = f"{gateway}/mcp"

    def session(
        self, user: str, admin: bool = False, modern: bool = False
    ) -> contextlib.AbstractAsyncContextManager[ClientSession]:
        return mcp_session(self.url, mint_token(self.settings, user, admin=admin), modern=modern)


@pytest.fixture
async def mcp(settings: Settings) -> AsyncIterator[Mcp]:
    async with tools_and_gateway(settings) as (cfg, _bus, tools, base_url):
        yield Mcp(cfg, base_url.removesuffix("/api/v1"), tools)


def by_name(listing: types.ListToolsResult) -> dict[str, types.Tool]:
    return {t.name: t for t in listing.tools}


def payload(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_tools_list_is_the_agent_visible_registry_with_true_hints(mcp: Mcp) -> None:
    async with mcp.session("alice") as alice:
        tools = by_name(await alice.list_tools())
    assert "ask_agent" in tools  # the chat agent, besides the tool services' tools (test_mcp_workflows.py)
    del tools["ask_agent"]
    registry = {d.name: d for d in await mcp.tools.client.list_tools()}
    expected = {name for name, d in registry.items() if d.agent and not d.high_risk}
    assert set(tools) == expected
    assert {"kb_search", "memory_get", "memory_upsert", "memory_delete", "doc_parse"} <= set(tools)
    assert "kb_delete" not in tools  # not agent-visible

    for name, tool in tools.items():
        descriptor = registry[name]
        assert tool.title == descriptor.title
        assert tool.input_schema["type"] == "object"
        for injected in descriptor.inject:  # user_id, session_id: from the token, never the client
            assert injected not in tool.input_schema.get("properties", {}), name
            assert injected not in tool.input_schema.get("required", []), name
        assert tool.annotations is not None
        assert tool.annotations.open_world_hint is False, name  # every tool here is local

    search = tools["kb_search"]
    assert set(search.input_schema["required"]) == {"kb", "query"}
    assert search.annotations.read_only_hint is True
    for read in ("memory_get", "memory_list", "kb_list", "history_get", "wiki_search", "doc_parse"):
        assert tools[read].annotations.read_only_hint is True, read
    assert tools["memory_delete"].annotations.destructive_hint is True
    assert tools["memory_delete"].annotations.read_only_hint is False
    assert tools["memory_upsert"].annotations.destructive_hint is True  # replaces the stored value
    assert tools["report_store"].annotations.destructive_hint is False


async def test_high_risk_tools_only_for_admins(mcp: Mcp) -> None:
    async with mcp.session("alice") as alice:
        assert "code_exec" not in by_name(await alice.list_tools())
        refused = await alice.call_tool("code_exec", {"code": "print(6 * 7)"})
        assert error_text(refused) == "unknown_tool: Unknown tool: code_exec"
    async with mcp.session("root", admin=True) as root:
        tools = by_name(await root.list_tools())
        assert "code_exec" in tools
        assert tools["code_exec"].annotations.read_only_hint is False
        ran = payload(await root.call_tool("code_exec", {"code": "print(6 * 7)"}))
        assert ran["stdout"].strip() == "42"


async def test_memory_is_the_callers_own(mcp: Mcp) -> None:
    async with mcp.session("alice") as alice, mcp.session("bob") as bob:
        stored = payload(await alice.call_tool("memory_upsert", {"key": "colour", "value": {"fav": "teal"}}))
        assert stored["user_id"] == "alice"
        got = await alice.call_tool("memory_get", {"key": "colour"})
        assert payload(got)["value"] == {"fav": "teal"}
        assert got.structured_content is not None and got.structured_content["value"] == {"fav": "teal"}

        # Bob cannot read it, list it, or reach it by naming Alice in the arguments.
        assert error_text(await bob.call_tool("memory_get", {"key": "colour"})).startswith("not_found:")
        assert payload(await bob.call_tool("memory_list", {}))["items"] == []
        spoofed = await bob.call_tool("memory_get", {"key": "colour", "user_id": "alice"})
        assert error_text(spoofed).startswith("not_found:")
        written = payload(await bob.call_tool("memory_upsert", {"key": "colour", "value": "red", "user_id": "alice"}))
        assert written["user_id"] == "bob"
        assert payload(await alice.call_tool("memory_get", {"key": "colour"}))["value"] == {"fav": "teal"}

        assert payload(await alice.call_tool("memory_delete", {"key": "colour"}))
        assert error_text(await alice.call_tool("memory_get", {"key": "colour"})).startswith("not_found:")


async def test_kb_search_sees_only_the_callers_knowledge_bases(mcp: Mcp) -> None:
    kb = await mcp.tools("kb_create", "alice", name="handbook")
    added = await mcp.tools(
        "kb_ingest", "alice", kb="handbook", title="Travel", text="Book trains for journeys under four hours."
    )
    assert (await mcp.tools.wait_job(added["job_id"])).status == "done"

    async with mcp.session("alice") as alice, mcp.session("bob") as bob:
        hits = payload(await alice.call_tool("kb_search", {"kb": "handbook", "query": "trains", "mode": "fulltext"}))
        assert any("trains" in c["text"] for c in hits["chunks"])
        assert [k["name"] for k in payload(await alice.call_tool("kb_list", {}))["items"]] == ["handbook"]

        missing = await bob.call_tool("kb_search", {"kb": "handbook", "query": "trains", "mode": "fulltext"})
        assert error_text(missing).startswith("not_found:")
        spoofed = await bob.call_tool("kb_search", {"kb": "handbook", "query": "trains", "user_id": "alice"})
        assert error_text(spoofed).startswith("not_found:")
        assert payload(await bob.call_tool("kb_list", {}))["items"] == []

    # An admin's token over MCP is an agent's: it reaches the admin's own data, not Alice's KB.
    async with mcp.session("root", admin=True) as root:
        by_id = await root.call_tool("kb_search", {"kb": kb["id"], "query": "trains", "mode": "fulltext"})
        assert error_text(by_id).startswith("not_found:")


async def test_tool_errors_are_results_not_protocol_errors(mcp: Mcp) -> None:
    async with mcp.session("alice") as alice:
        bad = await alice.call_tool("kb_search", {"kb": "handbook"})  # no query
        assert error_text(bad).startswith("bad_arguments: kb_search: query")
        message = error_text(bad).split(": ", 1)[1]
        assert bad.structured_content == {"error": {"code": "bad_arguments", "message": message}}
        unknown = await alice.call_tool("no_such_tool", {})
        assert error_text(unknown) == "unknown_tool: Unknown tool: no_such_tool"
        # The session still works after both.
        assert payload(await alice.call_tool("memory_list", {}))["items"] == []


async def test_no_or_bad_token_is_refused(mcp: Mcp) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=10) as http:
        bare = await http.post(mcp.url, json=request, headers=headers)
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"].startswith("Bearer resource_metadata=")
        forged = await http.post(mcp.url, json=request, headers={**headers, "Authorization": "Bearer not-a-jwt"})
        assert forged.status_code == 401
        token = {"Authorization": f"Bearer {mint_token(mcp.settings, 'alice')}"}
        for method in ("GET", "DELETE"):  # a stream to open or a session to end needs the session's id
            refused = await http.request(method, mcp.url, headers={**headers, **token})
            assert refused.status_code == 400
            assert "Mcp-Session-Id" in refused.json()["error"]["message"]
    with pytest.raises(ExceptionGroup) as refused:  # the SDK client gives up at the handshake
        async with mcp_session(mcp.url, None):
            pass
    assert refused.group_contains(MCPError, depth=None)


async def test_the_2026_protocol_acts_as_the_token_user_too(mcp: Mcp) -> None:
    async with mcp.session("alice", modern=True) as alice, mcp.session("bob", modern=True) as bob:
        assert alice.protocol_version == "2026-07-28"
        assert "code_exec" not in by_name(await alice.list_tools())
        stored = payload(await alice.call_tool("memory_upsert", {"key": "k", "value": 1, "user_id": "bob"}))
        assert stored["user_id"] == "alice"
        assert error_text(await bob.call_tool("memory_get", {"key": "k"})).startswith("not_found:")
    async with mcp.session("root", admin=True, modern=True) as root:
        assert "code_exec" in by_name(await root.list_tools())


async def test_the_schema_lookup_answers_what_the_caller_was_listed(mcp: Mcp) -> None:
    """The SDK checks a 2026-protocol call's `Mcp-Param-*` headers against the called tool's schema,
    which the gateway answers from its catalog (no `tools/list` per call): the schema this caller
    was listed, and nothing for a tool hidden from them."""
    async with mcp.session("alice", modern=True) as session:
        listed = by_name(await session.list_tools())
    catalog = ToolCatalog(mcp.tools.client)
    alice, root = Principal("alice"), Principal("root", is_admin=True)
    assert catalog.input_schema(mcp.settings, alice, "kb_search") is None  # nothing fetched yet
    assert await catalog.find(mcp.settings, alice, "kb_search") is not None  # as `prepare` does for a call
    assert catalog.input_schema(mcp.settings, alice, "kb_search") == listed["kb_search"].input_schema
    assert catalog.input_schema(mcp.settings, alice, "code_exec") is None  # high-risk: not listed to Alice
    assert catalog.input_schema(mcp.settings, root, "code_exec") is not None
    assert catalog.input_schema(mcp.settings, alice, "no_such_tool") is None


async def test_every_call_is_audited_with_its_tool(mcp: Mcp) -> None:
    async with mcp.session("alice") as alice:
        await alice.call_tool("memory_upsert", {"key": "audited", "value": True})
        await alice.call_tool("memory_get", {"key": "absent"})
    token = mint_token(mcp.settings, "root", admin=True)
    expected = {("alice", "POST", "/mcp", "tool=memory_upsert", "ok"),
                ("alice", "POST", "/mcp", "tool=memory_get error=not_found", "ok")}
    async with httpx.AsyncClient(base_url=mcp.gateway, headers={"Authorization": f"Bearer {token}"}) as http:

        async def audited() -> bool:  # the read's row is committed after its response
            rows = (await http.get("/api/v1/admin/audit", params={"route": "tool=", "limit": 50})).json()["items"]
            return expected <= {(r["user_id"], r["method"], r["route"], r["target"], r["outcome"]) for r in rows}

        await eventually(audited, attempts=100, every_s=0.05)


async def test_the_apis_rate_limit_applies(settings: Settings) -> None:
    gateway = await EmbeddedGateway(settings.model_copy(update={"rate_limit_per_min": 3})).start()
    try:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
            "Authorization": f"Bearer {mint_token(settings, 'carol')}",
        }
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=10) as http:
            for _ in range(3):
                answered = await http.post("/mcp", json=ping)
                assert answered.status_code == 200 and answered.json()["result"] == {}, answered.text
            limited = await http.post("/mcp", json=ping)
            assert limited.status_code == 429
            assert int(limited.headers["retry-after"]) > 0
    finally:
        await gateway.stop()


async def test_a_tool_service_that_starts_later_is_listed_without_a_gateway_change(settings: Settings) -> None:
    cfg = settings.model_copy(update={"rate_limit_per_min": 100_000})
    async with connected(cfg) as bus:
        go = await InProcess(cfg, py=False).start()
        gateway = await EmbeddedGateway(cfg).start()
        py: InProcess | None = None
        try:
            await Tools(bus).ready(services=("go",))
            async with mcp_session(f"{gateway.url}/mcp", mint_token(cfg, "alice")) as alice:
                names = set(by_name(await alice.list_tools()))
                assert "kb_search" in names and "doc_parse" not in names
                py = await InProcess(cfg, go=False).start()
                await Tools(bus).ready(services=("go", "py"))
                # A call naming a tool the cached listing lacks asks the services again at once.
                parsed = payload(await alice.call_tool("doc_parse", {"text": "# Title\n\nbody", "filename": "a.md"}))
                assert parsed["title"] == "Title"
                assert "doc_parse" in by_name(await alice.list_tools())
        finally:
            await gateway.stop()
            if py is not None:
                await py.stop()
            await go.stop()
