"""A saved workflow run as an MCP tool vs the same workflow over REST + SSE, same run
(`python -m bench.mcp --workflow`).

The workflow is input → agent (the built-in offline model, so the model costs next to nothing
and what is measured is the roads) → output. Three roads, interleaved call by call as the same
user against the gateway as its own process, with a dispatcher and both tool services as
processes: `POST /api/v1/tasks/stream {workflow_id, input}` read to its end (REST + SSE), and
`tools/call workflow.<id>` through the real MCP SDK client, once answered as one JSON body
(no progress token) and once as an SSE stream with progress notifications (a progress token).
Prints p50 of each and the ratios MCP / REST+SSE (target ≤ 1.3×)."""

from __future__ import annotations

import logging
import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench.ingest import ROOT, spawn, wait_tools
from services.gateway.embedded import GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.natsd import NatsServer, free_port
from shared.settings import Settings

USER = "bench"
DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input",
               "config": {"schema": {"type": "object", "properties": {"text": {"type": "string"}}}}},
              {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
              {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}}],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}  # fmt: skip
INPUT = {"text": "Which trips may be booked by train?"}


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    return None


async def workflow_main(calls: int) -> None:
    from bench.mcp import Call, interleaved

    logging.basicConfig(level=logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="agentix-bench-mcp-wf-"))
    nats = NatsServer(work / "nats").start()
    procs: list[subprocess.Popen[bytes]] = []
    gateway: GatewayProcess | None = None
    bus: Bus | None = None
    try:
        settings = Settings(nats_servers=[nats.url], subject_prefix="benchmcpwf", data_dir=work / "data",
                            rate_limit_per_min=10_000_000)  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")} | settings_env(settings)
        env["PYTHONPATH"] = str(ROOT)
        bus = await Bus.connect(settings, name="bench")
        await bus.declare()
        procs += [spawn(m, env, work / f"{m}.log")
                  for m in ("services.tools_py", "services.tools_go_equiv", "services.dispatcher")]  # fmt: skip
        await wait_tools(ToolClient(bus))
        gateway = await GatewayProcess(env, free_port()).start()
        headers = {"Authorization": f"Bearer {mint_token(settings, USER)}"}
        async with (
            httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as rest,
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            saved = await rest.post("/api/v1/workflows", json={"name": "bench", "dsl": DSL})
            saved.raise_for_status()
            tool = f"workflow.{saved.json()['id']}"
            body = {"workflow_id": saved.json()["id"], "input": INPUT}
            await session.initialize()

            async def via_rest_sse() -> None:
                async with rest.stream("POST", "/api/v1/tasks/stream", json=body) as response:
                    assert response.status_code == 200, await response.aread()
                    seen = b""
                    async for chunk in response.aiter_bytes():
                        seen += chunk
                    assert b"event: done" in seen, seen[-500:]

            async def via_mcp_json() -> None:
                result = await session.call_tool(tool, INPUT)
                assert not result.is_error, result.content

            async def via_mcp_progress() -> None:
                result = await session.call_tool(tool, INPUT, progress_callback=_ignore)
                assert not result.is_error, result.content

            roads: list[Call] = [via_rest_sse, via_mcp_json, via_mcp_progress]
            await interleaved(max(10, calls // 10), roads)  # warm up every road
            rest_ms, json_ms, progress_ms = (statistics.median(s) for s in await interleaved(calls, roads))
        print(f"workflow (input → agent on the offline model → output), {calls} runs per road, interleaved")
        print(f"p50 REST + SSE (POST /api/v1/tasks/stream):            {rest_ms:.2f} ms")
        print(f"p50 MCP tools/call workflow.<id> (JSON answer):         {json_ms:.2f} ms")
        print(f"p50 MCP tools/call with a progress token (SSE answer): {progress_ms:.2f} ms")
        print(f"RATIO p50 MCP / REST+SSE = {json_ms / rest_ms:.2f}x (JSON), {progress_ms / rest_ms:.2f}x (progress) "
              "(target <= 1.3x)")
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
