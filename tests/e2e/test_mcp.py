"""`/mcp` on the suite started as `agentix up` starts it (every service its own process): one
MCP client session keeps working across a gateway restart, because the endpoint is stateless."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentix.up import wait_ready
from tests.e2e.conftest import RunningSuite, start_suite


@pytest.fixture
def suite(tmp_path: Path) -> Iterator[RunningSuite]:
    running = start_suite(tmp_path)  # its own: this test restarts the gateway
    yield running
    running.suite.stop()
    running.nats.cleanup()


def restart_gateway(running: RunningSuite) -> None:
    # uvicorn re-raises the signal it handled
    assert running.suite.stop_one("gateway") in (0, -signal.SIGTERM)
    port = running.url.rsplit(":", 1)[1]
    running.suite.spawn("gateway", "services.gateway", ["--port", port])
    assert wait_ready(running.url, running.suite), running.suite.dead()


def text_of(result: types.CallToolResult) -> dict:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


async def test_a_session_survives_a_gateway_restart(suite: RunningSuite) -> None:
    async with (
        httpx2.AsyncClient(headers=suite.headers("alice"), timeout=30) as http,
        streamable_http_client(f"{suite.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        assert "kb_search" in {t.name for t in (await session.list_tools()).tools}
        await session.call_tool("memory_upsert", {"key": "restart", "value": "before"})

        restart_gateway(suite)

        got = text_of(await session.call_tool("memory_get", {"key": "restart"}))
        assert got["value"] == "before" and got["user_id"] == "alice"
        assert "kb_search" in {t.name for t in (await session.list_tools()).tools}
