"""The bridge's stdio servers: an admin registers `{command, args, env}`, a tools-go service
starts it in the sandbox `code_exec` uses (no network, its own working directory, limits), its
tools are listed and called like any bridged tool — through a workflow's agent too —, it is
started again when it dies (its working directory kept), and stopped when it is unregistered.
The server is a tiny one the tests ship (`tests/support/mcp_stdio_server.py`, the real MCP SDK).
Last, a server on the legacy HTTP+SSE transport."""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.auth_tokens import mint_token
from shared.bus.control import ControlPlane
from shared.contract.models import ModelChain, ModelConfig
from shared.settings import Settings
from tests.integration.test_mcp_bridge import Env, bridged, chain, ok, problem, run_task, status_of
from tests.integration.test_tools_support import tools_and_gateway
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.mcp_server import McpServerProcess
from tests.support.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "support" / "mcp_stdio_server.py"
SITE = sysconfig.get_paths()["purelib"]  # the venv's packages (the MCP SDK)
PYTHON = os.path.realpath(sys.executable)  # the real binary: the sandbox binds its directory

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"),
                                reason="the sandbox needs Linux namespaces and root")  # fmt: skip


@pytest.fixture
async def env(settings: Settings) -> AsyncIterator[Env]:
    async with tools_and_gateway(settings) as (cfg, bus, tools, base_url):

        def client(user: str, admin: bool = False) -> httpx.AsyncClient:
            headers = {"Authorization": f"Bearer {mint_token(cfg, user, admin=admin)}"}
            return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)

        async with client("root", admin=True) as root, client("alice") as alice:
            yield Env(cfg, bus, tools, root, alice, None)  # type: ignore[arg-type]  # no HTTP server here


async def register(env: Env, **fields: Any) -> dict[str, Any]:
    body = {"name": "tiny", "command": PYTHON, "args": [str(SERVER)],
            "env": {"PYTHONPATH": SITE}, "read_paths": [SITE], **fields}  # fmt: skip
    return ok(await env.root.post("/admin/mcp-servers", json=body), 201)


async def call(env: Env, tool: str, **args: Any) -> Any:
    reply = await env.tools.client.call(f"tiny.{tool}", args)
    assert reply.ok, reply.error
    return reply.result


def server_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(SERVER).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def test_a_stdio_server_runs_in_the_sandbox_restarts_and_stops(env: Env) -> None:
    made = await register(env)
    assert made["transport"] == "stdio" and made["has_env"] is True and "env" not in made
    assert "PYTHONPATH" not in (await env.root.get(f"/admin/mcp-servers/{made['id']}")).text  # write-only
    tools = await bridged(env, present=True, prefix="tiny.")
    assert {"tiny.add", "tiny.boot", "tiny.note", "tiny.reach", "tiny.die"} <= set(tools)
    assert (await call(env, "add", a=2, b=40)) == {"result": 42}

    # the sandbox: no network (not even the NATS server next door), a working directory of its own
    nats_host, nats_port = env.settings.nats_servers[0].removeprefix("nats://").rsplit(":", 1)
    assert (await call(env, "reach", host=nats_host, port=int(nats_port))) == {"result": False}
    notes = (await call(env, "note", line="first"))["result"]
    assert notes == ["first", "cwd=/var/lib/mcp-server"]

    # it dies: the bridge starts it again, its working directory kept
    first = (await call(env, "boot"))["result"]
    reply = await env.tools.client.call("tiny.die", {})
    assert not reply.ok and reply.error is not None and reply.error.code in ("unavailable", "mcp_error")

    async def restarted() -> str | None:
        again = await env.tools.client.call("tiny.boot", {})
        return again.result["result"] if again.ok and again.result["result"] != first else None

    await eventually(restarted, attempts=600, every_s=0.05)
    assert (await call(env, "note", line="second"))["result"] == ["first", "second", "cwd=/var/lib/mcp-server"]
    await status_of(env, "tiny", connected=True)

    # unregistered: its tools leave the registry and its process is gone
    assert (await env.root.delete(f"/admin/mcp-servers/{made['id']}")).status_code == 204
    await bridged(env, present=False, prefix="tiny.")
    async def gone() -> bool:
        return not server_processes()

    await eventually(gone, attempts=600, every_s=0.05)


async def test_a_network_is_given_only_when_allowed(env: Env) -> None:
    await register(env, network=True)
    await bridged(env, present=True, prefix="tiny.")
    nats_host, nats_port = env.settings.nats_servers[0].removeprefix("nats://").rsplit(":", 1)
    assert (await call(env, "reach", host=nats_host, port=int(nats_port))) == {"result": True}


async def test_a_workflows_agent_calls_a_stdio_servers_tool(env: Env) -> None:
    await register(env)
    await bridged(env, present=True, prefix="tiny.")
    async with oai.OpenAIServer() as srv:
        config = ModelConfig(id="m", name="m", base_url=srv.url, model="m")
        await ControlPlane(env.bus).put("models.chain", ModelChain(revision=1, active="m", models={"m": config}))
        srv.script([oai.reply("Adding.", tool_calls=[oai.tool_call("tiny_add", {"a": 20, "b": 22}, id="c1")]),
                    oai.reply("It is 42.")], model="m")  # fmt: skip
        dsl = chain({"id": "in", "kind": "input"},
                    {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.q }}", "tools": ["tiny.add"]}},
                    {"id": "out", "kind": "output", "config": {"value": "{{ ans }}"}})  # fmt: skip
        async with dispatcher(env.settings):
            events = await run_task(env, dsl)
    assert events[-1].type == "done" and events[-1].status == "done", events[-1]
    assert events[-1].output["out"] == "It is 42."
    results = [e for e in events if e.type == "tool.result"]
    assert results and results[0].ok is True


async def test_the_admin_api_refuses_a_mixed_or_relative_registration(env: Env) -> None:
    relative = await env.root.post("/admin/mcp-servers", json={"name": "x", "command": "python3"})
    assert "absolute" in str(problem(relative, 422))
    mixed = await env.root.post("/admin/mcp-servers", json={"name": "x", "command": "/bin/true",
                                                             "url": "http://127.0.0.1:1/mcp"})  # fmt: skip
    assert "stdio" in str(problem(mixed, 422))
    env_on_http = await env.root.post("/admin/mcp-servers", json={"name": "x", "url": "http://127.0.0.1:1/mcp",
                                                                   "env": {"A": "b"}})  # fmt: skip
    problem(env_on_http, 422)


async def test_a_legacy_sse_server_is_bridged(env: Env) -> None:
    legacy = await McpServerProcess(token="legacy-token", sse=True).start()
    try:
        made = ok(await env.root.post("/admin/mcp-servers", json={
            "name": "old", "transport": "sse", "url": legacy.url,
            "headers": {"Authorization": "Bearer legacy-token"}}), 201)  # fmt: skip
        assert made["transport"] == "sse" and made["has_headers"] is True
        tools = await bridged(env, present=True, prefix="old.")
        assert {"old.add", "old.shout"} <= set(tools)
        reply = await env.tools.client.call("old.add", {"a": 1, "b": 2})
        assert reply.ok and reply.result == {"result": 3}, reply.error
    finally:
        await legacy.kill()


async def test_sampling_is_answered_by_the_configured_model_for_servers_that_opted_in(settings: Settings) -> None:
    async with oai.OpenAIServer() as srv:
        srv.script([oai.reply("Paris")])
        cfg = settings.model_copy(update={"llm_base_url": srv.url, "llm_model": "m", "llm_api_key": "k"})
        async with tools_and_gateway(cfg) as (cfg, bus, tools, base_url):
            headers = {"Authorization": f"Bearer {mint_token(cfg, 'root', admin=True)}"}
            async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as root:
                env = Env(cfg, bus, tools, root, root, None)  # type: ignore[arg-type]
                made = await register(env, sampling=True)
                assert made["sampling"] is True
                await bridged(env, present=True, prefix="tiny.")
                assert (await call(env, "ask", question="Capital of France?")) == {"result": "Paris"}
                asked = srv.requests()[-1]["body"]
                assert asked["model"] == "m" and asked["messages"][0] == {"role": "system",
                                                                          "content": "Answer in one word."}
                assert asked["messages"][1] == {"role": "user", "content": "Capital of France?"}

                # without the opt-in the bridge offers no sampling: the server's tool fails
                ok(await root.put(f"/admin/mcp-servers/{made['id']}", json={
                    "name": "tiny", "command": PYTHON, "args": [str(SERVER)], "read_paths": [SITE],
                    "sampling": False}))  # fmt: skip
                await status_of(env, "tiny", connected=True)

                async def refused() -> bool:
                    reply = await tools.client.call("tiny.ask", {"question": "again?"})
                    return not reply.ok

                await eventually(refused, attempts=600, every_s=0.05)
        assert len(srv.requests()) == 1
