"""A tool call through the gateway's MCP endpoint vs the same tool over NATS, same run.

Two MCP client sessions (the real SDK client, Streamable HTTP: one after `initialize`, protocol
2025-11-25, one after `discover`, protocol 2026-07-28) against `/mcp` on the gateway as its own
process, and a `ToolClient` on the bus, call the same tool with the same arguments as the same
user, interleaved call by call (so both see the same machine load). Prints p50 of each and the
ratio MCP / NATS (target ≤ 2×). What MCP adds: HTTP, bearer verification, the rate limit, an
audit row per POST, JSON-RPC and the SDK's per-request transport. For scale, the same tool through
the gateway's own REST route is measured in the same rounds (what HTTP + the gateway cost without
MCP). Tool services and the gateway run as processes.
Run:  python -m bench.mcp [--calls 500] [--tool kb_search|memory_get]

`--workflow` measures instead a saved workflow run as an MCP tool (`workflow.<id>`) against the
same workflow over REST + SSE (`bench/mcp_workflow.py`, target ≤ 1.3×).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.ingest import ROOT, call, spawn, wait_tools
from services.gateway.embedded import GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta
from shared.natsd import NatsServer, free_port
from shared.settings import Settings

USER = "bench"  # bench.ingest's `call` acts as this user too
TEXT = (
    "Trains are booked for journeys under four hours. The Berlin office pays for rail passes. "
    "Flights need a manager's approval and a note on why the train would not do."
)
ARGS: dict[str, dict[str, Any]] = {
    "kb_search": {"kb": "handbook", "query": "who pays for trains", "mode": "hybrid"},
    "memory_get": {"key": "colour"},
}
# The same call through the gateway's REST API: (method, path, JSON body).
REST: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "kb_search": ("POST", "/api/v1/kb/handbook/search", {"query": "who pays for trains", "mode": "hybrid"}),
    "memory_get": ("GET", "/api/v1/memory/colour", None),
}


async def prepare(client: ToolClient) -> None:
    """The data both roads read: a small KB, ingested, and one memory entry."""
    await call(client, "kb_create", name="handbook")
    job = await call(client, "kb_ingest", kb="handbook", title="Travel", text=TEXT)
    for _ in range(600):
        state = await call(client, "kb_job_get", job_id=job["job_id"])
        if state["status"] == "done":
            break
        await asyncio.sleep(0.05)
    else:
        raise RuntimeError(f"ingestion did not finish: {state}")
    await call(client, "memory_upsert", key="colour", value={"fav": "teal"})


Call = Callable[[], Awaitable[None]]


async def interleaved(calls: int, roads: list[Call]) -> list[list[float]]:
    """Milliseconds per call of each road, the roads taking turns call by call."""
    samples: list[list[float]] = [[] for _ in roads]
    for i in range(calls):
        # Rotate which goes first, so no road always follows another's warm caches.
        for k in range(len(roads)):
            j = (i + k) % len(roads)
            started = time.perf_counter()
            await roads[j]()
            samples[j].append((time.perf_counter() - started) * 1000)
    return samples


async def main(calls: int, tool: str) -> None:
    logging.basicConfig(level=logging.ERROR)  # the client's "not up yet" warnings while services start
    work = Path(tempfile.mkdtemp(prefix="agentix-bench-mcp-"))
    nats = NatsServer(work / "nats").start()
    procs: list[subprocess.Popen[bytes]] = []
    gateway: GatewayProcess | None = None
    bus: Bus | None = None
    try:
        settings = Settings(
            nats_servers=[nats.url], subject_prefix="benchmcp", data_dir=work / "data", rate_limit_per_min=10_000_000
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")} | settings_env(settings)
        env["PYTHONPATH"] = str(ROOT)
        bus = await Bus.connect(settings, name="bench")
        await bus.declare()
        procs += [spawn(m, env, work / f"{m}.log") for m in ("services.tools_py", "services.tools_go_equiv")]
        client = ToolClient(bus)
        await wait_tools(client)
        await prepare(client)
        gateway = await GatewayProcess(env, free_port()).start()
        args = ARGS[tool]
        headers = {"Authorization": f"Bearer {mint_token(settings, USER)}"}
        async with (
            httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as rest,
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
            streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read2, write2),
            ClientSession(read2, write2) as modern,
        ):
            await session.initialize()  # the handshake era (protocol 2025-11-25)
            await modern.discover()  # the 2026-07-28 protocol: every request self-contained

            async def via_mcp() -> None:
                result = await session.call_tool(tool, args)
                assert not result.is_error, result.content

            async def via_mcp_2026() -> None:
                result = await modern.call_tool(tool, args)
                assert not result.is_error, result.content

            async def via_nats() -> None:
                reply = await client.call(tool, {**args, "user_id": USER}, ToolMeta(user_id=USER))
                assert reply.ok, reply.error

            method, path, body = REST[tool]

            async def via_rest() -> None:
                response = await rest.request(method, path, json=body)
                assert response.status_code == 200, response.text

            roads: list[Call] = [via_mcp, via_mcp_2026, via_nats, via_rest]
            await interleaved(max(20, calls // 10), roads)  # warm up every road
            mcp_ms, modern_ms, nats_ms, rest_ms = (statistics.median(s) for s in await interleaved(calls, roads))
        print(f"tool {tool}, {calls} calls per road, interleaved, one MCP session per protocol")
        print(f"p50 over NATS (ToolClient):     {nats_ms:.2f} ms")
        print(f"p50 through REST ({method} {path}): {rest_ms:.2f} ms")
        print(f"p50 through /mcp (SDK client, initialize, 2025-11-25): {mcp_ms:.2f} ms")
        print(f"p50 through /mcp (SDK client, discover, 2026-07-28):   {modern_ms:.2f} ms")
        print(f"RATIO p50 MCP / NATS = {mcp_ms / nats_ms:.2f}x (2025-11-25), {modern_ms / nats_ms:.2f}x (2026-07-28) "
              f"(target <= 2x); MCP / REST = {mcp_ms / rest_ms:.2f}x")
    finally:
        if bus is not None:
            await bus.close()
        if gateway is not None:
            await gateway.stop()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        nats.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--tool", choices=sorted(ARGS), default="kb_search")
    parser.add_argument("--workflow", action="store_true", help="a workflow as an MCP tool vs REST + SSE")
    parsed = parser.parse_args()
    if parsed.workflow:
        from bench.mcp_workflow import workflow_main

        asyncio.run(workflow_main(parsed.calls))
    else:
        asyncio.run(main(parsed.calls, parsed.tool))
