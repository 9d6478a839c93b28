"""The bridge never hangs a caller: a tool that never answers gives a `timeout` tool error at
the bridge's call timeout; a server that accepts connections but never speaks stays `connecting`
and its calls fail at once; headers that do not decrypt are reported, never retried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from services.tools_go_equiv.mcp_bridge.bridge import McpBridge
from services.tools_go_equiv.mcp_bridge.connection import Timing
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.control_keys import MCP_SERVERS_KEY
from shared.contract.mcp import McpServerConfig, McpServers
from shared.contract.tools import ToolReply
from shared.secrets import encrypt_secret
from tests.support.mcp_server import McpServerProcess
from tests.support.wait import eventually

FAST = Timing(connect_s=0.5, call_s=1.0, probe_every_s=0.5, retry_min_s=0.05, retry_max_s=0.2)


@pytest.fixture
async def bridge(bus: Bus) -> AsyncIterator[McpBridge]:
    b = McpBridge(bus, "the-deployment-secret", concurrency=8, timing=FAST)
    yield b
    await b.stop(2)


async def apply(bridge: McpBridge, revision: int, *servers: McpServerConfig) -> None:
    doc = McpServers(revision=revision, servers={s.name: s for s in servers})
    await bridge.apply(MCP_SERVERS_KEY, doc.model_dump(mode="json"), revision)


async def call(bus: Bus, server: str, tool: str, args: dict, timeout_s: float = 10) -> ToolReply:
    """A request on the bridged subject, as a caller holding the descriptor sends it."""
    client = ToolClient(bus, services=())
    client._where[f"{server}.{tool}"] = "mcp"  # what list_tools would have told it
    return await client.call(f"{server}.{tool}", args, timeout_s=timeout_s)


async def test_a_tool_that_never_answers_is_a_timeout_error(bus: Bus, bridge: McpBridge) -> None:
    mcp = await McpServerProcess().start()
    try:
        await apply(bridge, 1, McpServerConfig(name="calc", url=mcp.url))
        await eventually(lambda: _connected(bridge, "calc"), attempts=400, every_s=0.025)
        loop = asyncio.get_running_loop()
        started = loop.time()
        reply = await call(bus, "calc", "shout", {"text": "hang"})
        assert not reply.ok and reply.error.code == "timeout", reply
        assert "did not answer within 1s" in reply.error.message
        assert loop.time() - started < 5  # the bridge's timeout, not the caller's 10 s
        # The session survives a slow tool: the next call is answered.
        assert (await call(bus, "calc", "shout", {"text": "ok"})).result == {"result": "OK"}
        status = bridge.status()["servers"][0]
        assert status["connected"] and status["calls"] == 2 and status["errors"] == 1
    finally:
        await mcp.kill()


async def _connected(bridge: McpBridge, name: str) -> bool:
    conn = bridge.servers.get(name)
    return conn is not None and conn.connected


async def test_a_silent_server_stays_connecting_and_calls_fail_at_once(bus: Bus, bridge: McpBridge) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def mute(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # holds the connection open and never answers

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await apply(bridge, 1, McpServerConfig(name="mute", url=f"http://127.0.0.1:{port}/mcp"))

        async def failed_once() -> str | None:
            return bridge.servers["mute"].last_error

        assert await eventually(failed_once, attempts=400, every_s=0.025)
        reply = await call(bus, "mute", "anything", {})
        assert not reply.ok and reply.error.code == "unavailable" and "not connected" in reply.error.message
        assert bridge.descriptors() == []
    finally:
        for writer in accepted:
            writer.close()
        server.close()


async def test_headers_that_do_not_decrypt_are_reported(bus: Bus, bridge: McpBridge) -> None:
    sealed = encrypt_secret('{"Authorization": "Bearer x"}', "another-deployment-secret")
    await apply(bridge, 1, McpServerConfig(name="sealed", url="http://127.0.0.1:9/mcp", headers_enc=sealed))
    status = bridge.status()["servers"][0]
    assert not status["connected"] and "headers are unusable" in status["last_error"]
    reply = await call(bus, "sealed", "add", {})
    assert not reply.ok and "headers are unusable" in reply.error.message


async def test_an_older_document_never_undoes_a_newer_one(bus: Bus, bridge: McpBridge) -> None:
    await apply(bridge, 5, McpServerConfig(name="a", url="http://127.0.0.1:9/mcp", enabled=False))
    await apply(bridge, 4, McpServerConfig(name="a", url="http://127.0.0.1:9/mcp"))
    assert bridge.servers == {} and bridge.status()["disabled"] == ["a"] and bridge.revision == 5
