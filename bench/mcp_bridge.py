"""An external MCP tool through the bridge (over NATS, via `ToolClient`) vs the same MCP server
called directly with the `mcp` SDK, same server, same run.

The server is the test MCP server (`tests/support/mcp_server.py`, streamable HTTP on loopback,
its own process). The bridge runs as tools-go runs it (the control document applied, `list_tools`
served with the bridged tools). Two direct baselines: the SDK's default client (keeps HTTP
connections alive, and so meets uvicorn's ~40 ms wait before the next request of a connection —
see `mcp_bridge.connection.http_client`) and the SDK with the bridge's HTTP client (fresh
connections over plain HTTP). Calls are interleaved (bridge, direct, bridge, …) so drift hits
both alike (the default client is measured alone, after them); prints p50 of each and the
ratio against the same-HTTP baseline (target ≤ 1.5×).
Run: python -m bench.mcp_bridge [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.tools_go_equiv.mcp_bridge.bridge import McpBridge
from services.tools_go_equiv.mcp_bridge.connection import Timing, http_client
from services.tools_go_equiv.registry import with_bridged
from shared.bus import Bus
from shared.bus.tools import ToolClient, serve_tools
from shared.contract.control_keys import MCP_SERVERS_KEY
from shared.contract.mcp import McpServerConfig, McpServers
from shared.natsd import NatsServer
from shared.settings import Settings
from tests.support.mcp_server import McpServerProcess
from tests.support.wait import eventually


async def timed(call: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def _listed(client: ToolClient, name: str) -> bool:
    return name in {t.name for t in await client.list_tools()}


async def main(calls: int) -> None:
    nats = NatsServer().start()
    mcp = await McpServerProcess().start()
    try:
        settings = Settings(nats_servers=[nats.url], subject_prefix="bench", data_dir=Path(tempfile.mkdtemp()))
        bus = await Bus.connect(settings, "bench")
        bridge = McpBridge(bus, settings.persistent_secret("secret_key"), concurrency=64)
        doc = McpServers(revision=1, servers={"calc": McpServerConfig(name="calc", url=mcp.url)})
        await bridge.apply(MCP_SERVERS_KEY, doc.model_dump(mode="json"), 1)
        server = await serve_tools(bus, with_bridged(bridge.descriptors))
        client = ToolClient(bus, services=("go",))
        await eventually(lambda: _listed(client, "calc.add"), attempts=600, every_s=0.05)  # still connecting

        async def ignore(_: object) -> None:
            return None

        http = http_client(mcp.url, {}, Timing(), ignore)
        transport = streamable_http_client(mcp.url, http_client=http)
        async with http, Client(transport, cache=None) as direct, Client(mcp.url, cache=None) as default:

            async def via_bridge() -> None:
                reply = await client.call("calc.add", {"a": 2, "b": 3})
                assert reply.ok and reply.result == {"result": 5}, reply

            async def via_sdk() -> None:
                result = await direct.call_tool("add", {"a": 2, "b": 3})
                assert not result.is_error and result.structured_content == {"result": 5}

            async def via_sdk_default() -> None:
                result = await default.call_tool("add", {"a": 2, "b": 3})
                assert not result.is_error

            paths = {"bridge": via_bridge, "direct": via_sdk}
            for _ in range(20):  # warm every path
                for call in (via_bridge, via_sdk, via_sdk_default):
                    await call()
            samples: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(calls):
                for name, call in paths.items():
                    samples[name].append(await timed(call))
            # Alone, after the others: its server-side wait would otherwise slow the next call.
            samples["direct_default"] = [await timed(via_sdk_default) for _ in range(max(calls // 5, 20))]

        p50 = {name: statistics.median(values) for name, values in samples.items()}
        ratio = p50["bridge"] / p50["direct"]
        print(f"calls: {calls} through the bridge and direct, interleaved")
        print(f"direct SDK, SDK default HTTP client   p50 {p50['direct_default']:8.2f} ms")
        print(f"direct SDK, the bridge's HTTP client  p50 {p50['direct']:8.2f} ms")
        print(f"through the bridge (NATS, ToolClient) p50 {p50['bridge']:8.2f} ms "
              f"(overhead {p50['bridge'] - p50['direct']:+.2f} ms)")  # fmt: skip
        stats = bridge.servers["calc"].stats
        print(f"  (inside the bridge, the MCP call itself: mean {stats.total_ms / stats.calls:.2f} ms)")
        verdict = "OK" if ratio <= 1.5 else "OVER"
        print(f"RATIO bridge/direct (same HTTP client) = {ratio:.2f}x (target <= 1.5x) {verdict}"
              f"; vs the SDK default client = {p50['bridge'] / p50['direct_default']:.2f}x")  # fmt: skip
        await server.drain(2)
        await bridge.stop(2)
        await bus.close()
    finally:
        await mcp.kill()
        nats.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args().calls))
