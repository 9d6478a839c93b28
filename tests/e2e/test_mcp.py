"""`/mcp` on the suite started as `agentix up` starts it (every service its own process), with the
real MCP SDK client: kb_search and the memory tools act as the token's user (another user's data
is never reachable), a tool's failure is an `isError` result, no token or a bad one is refused,
and one client session keeps working across a gateway restart (the endpoint is stateless).

One suite for the module; the restart test is last, as it replaces the gateway process."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentix.up import wait_ready
from tests.e2e.conftest import RunningSuite, start_suite
from tests.support.wait import eventually

TRAVEL = "Trains are booked for journeys under four hours. Flights need a manager's approval."


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSuite]:
    running = start_suite(tmp_path_factory.mktemp("mcp"))  # its own: the last test restarts the gateway
    yield running
    running.stop()


@contextlib.asynccontextmanager
async def mcp_session(suite: RunningSuite, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{suite.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def restart_gateway(running: RunningSuite) -> None:
    # uvicorn re-raises the signal it handled
    assert running.suite.stop_one("gateway") in (0, -signal.SIGTERM)
    port = running.url.rsplit(":", 1)[1]
    running.suite.spawn("gateway", "services.gateway", ["--port", port])
    assert wait_ready(running.url, running.suite), running.suite.dead()


def text_of(result: types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


def error_of(result: types.CallToolResult) -> str:
    assert result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def ingested_kb(suite: RunningSuite, user: str, name: str) -> None:
    """A KB of `user` with one document, made through the HTTP API and ingested to the end."""
    async with httpx.AsyncClient(base_url=f"{suite.url}/api/v1", headers=suite.headers(user), timeout=30) as api:
        assert (await api.post("/kb", json={"name": name})).status_code == 201
        added = await api.post(f"/kb/{name}/documents", json={"title": "Travel", "text": TRAVEL})
        assert added.status_code == 202, added.text
        job = added.json()["job_id"]

        async def finished() -> str | None:
            status = (await api.get(f"/kb/ingest/{job}")).json()["status"]
            return status if status in ("done", "failed") else None

        assert await eventually(finished, attempts=600, every_s=0.05) == "done"


async def test_kb_search_and_memory_act_as_the_token_user_only(suite: RunningSuite) -> None:
    await ingested_kb(suite, "alice", "handbook")
    search = {"kb": "handbook", "query": "trains", "mode": "fulltext"}
    async with mcp_session(suite, suite.headers("alice")) as alice, mcp_session(suite, suite.headers("bob")) as bob:
        hits = text_of(await alice.call_tool("kb_search", search))["chunks"]
        assert any("Trains are booked" in c["text"] for c in hits), hits
        stored = text_of(await alice.call_tool("memory_upsert", {"key": "seat", "value": "window"}))
        assert stored["user_id"] == "alice"

        # Bob reaches neither Alice's KB nor her memory, not even by naming her in the arguments.
        assert error_of(await bob.call_tool("kb_search", search)).startswith("not_found:")
        spoofed = await bob.call_tool("kb_search", {**search, "user_id": "alice"})
        assert error_of(spoofed).startswith("not_found:")
        assert text_of(await bob.call_tool("kb_list", {}))["items"] == []
        assert error_of(await bob.call_tool("memory_get", {"key": "seat"})).startswith("not_found:")
        assert error_of(await bob.call_tool("memory_get", {"key": "seat", "user_id": "alice"})).startswith("not_found:")
        assert text_of(await bob.call_tool("memory_list", {}))["items"] == []
        # What Bob writes under the same key is his own and leaves Alice's value as it was.
        assert text_of(await bob.call_tool("memory_upsert", {"key": "seat", "value": "aisle", "user_id": "alice"}))[
            "user_id"] == "bob"  # fmt: skip
        assert text_of(await alice.call_tool("memory_get", {"key": "seat"}))["value"] == "window"


async def test_a_tool_error_is_an_is_error_result_with_the_tools_message(suite: RunningSuite) -> None:
    async with mcp_session(suite, suite.headers("carol")) as carol:
        bad = await carol.call_tool("kb_search", {"kb": "handbook"})  # no query
        text = error_of(bad)
        assert text.startswith("bad_arguments: kb_search: query"), text
        assert bad.structured_content == {"error": {"code": "bad_arguments", "message": text.split(": ", 1)[1]}}
        # The session goes on after it.
        assert text_of(await carol.call_tool("memory_list", {}))["items"] == []


async def test_no_token_or_a_bad_token_is_refused(suite: RunningSuite) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=10) as http:
        for headers in (accept, {**accept, "Authorization": "Bearer not-a-jwt"}):
            refused = await http.post(f"{suite.url}/mcp", json=request, headers=headers)
            assert refused.status_code == 401, refused.text
            # where to learn how to authenticate (RFC 9728)
            assert refused.headers["www-authenticate"].startswith("Bearer resource_metadata=")
    for headers in ({}, {"Authorization": "Bearer not-a-jwt"}):
        with pytest.raises(ExceptionGroup) as failed:  # the SDK client gives up at the handshake
            async with mcp_session(suite, headers):
                pass
        assert failed.group_contains(MCPError, depth=None)


async def test_a_session_survives_a_gateway_restart(suite: RunningSuite) -> None:
    async with mcp_session(suite, suite.headers("alice")) as session:
        assert "kb_search" in {t.name for t in (await session.list_tools()).tools}
        await session.call_tool("memory_upsert", {"key": "restart", "value": "before"})

        restart_gateway(suite)

        got = text_of(await session.call_tool("memory_get", {"key": "restart"}))
        assert got["value"] == "before" and got["user_id"] == "alice"
        assert "kb_search" in {t.name for t in (await session.list_tools()).tools}
