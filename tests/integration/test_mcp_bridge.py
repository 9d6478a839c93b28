"""External MCP servers as Agentix tools, end to end: a real `mcp` SDK server (two tools over
streamable HTTP, in its own process) registered through the admin API with an auth header; its
tools appear in `list_tools` with their annotations, a DSL `tool` node and a ReAct agent (through
the real dispatcher and the scripted model server) call them; disabling it removes them live;
killing it gives a clear tool error, and the bridge reconnects by itself once it is back."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.events import read_events
from shared.bus.tools import ToolClient
from shared.contract.events import AnyEvent
from shared.contract.models import ModelChain, ModelConfig
from shared.contract.tools import ToolDescriptor, ToolReply
from shared.settings import Settings
from tests.integration.test_tools_support import Tools, tools_and_gateway
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.mcp_server import McpServerProcess
from tests.support.wait import eventually

TOKEN = "s3cret-mcp-token-7d1e"
TIMEOUT_S = 60.0


@dataclass
class Env:
    settings: Settings
    bus: Bus
    tools: Tools
    root: httpx.AsyncClient  # an admin
    alice: httpx.AsyncClient
    mcp: McpServerProcess


@pytest.fixture
async def env(settings: Settings) -> AsyncIterator[Env]:
    mcp = await McpServerProcess(token=TOKEN).start()
    try:
        async with tools_and_gateway(settings) as (cfg, bus, tools, base_url):

            def client(user: str, admin: bool = False) -> httpx.AsyncClient:
                headers = {"Authorization": f"Bearer {mint_token(cfg, user, admin=admin)}"}
                return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)

            async with client("root", admin=True) as root, client("alice") as alice:
                yield Env(cfg, bus, tools, root, alice, mcp)
    finally:
        await mcp.kill()


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()


async def bridged(env: Env, present: bool, prefix: str = "calc.") -> dict[str, ToolDescriptor]:
    """`list_tools`, once the server's tools are (or are no longer) in it."""

    async def listed() -> tuple[dict[str, ToolDescriptor]] | None:
        tools = {t.name: t for t in await env.tools.client.list_tools(timeout_s=2) if t.name.startswith(prefix)}
        return (tools,) if bool(tools) == present else None  # a tuple: truthy even when empty

    return (await eventually(listed, attempts=300, every_s=0.05))[0]


async def register(env: Env, **fields: Any) -> dict[str, Any]:
    body = {"name": "calc", "url": env.mcp.url, "headers": {"Authorization": f"Bearer {TOKEN}"}, **fields}
    return ok(await env.root.post("/admin/mcp-servers", json=body), 201)


async def status_of(env: Env, name: str, failing: bool = False, **want: Any) -> dict[str, Any]:
    """The server's entry in `/admin/status` once it shows `want` (and, if `failing`, an error)."""

    async def check() -> dict[str, Any] | None:
        servers = {s["name"]: s for s in ok(await env.root.get("/admin/status"))["mcp_servers"]}
        entry = servers.get(name)
        if entry is None or (failing and not entry.get("last_error")):
            return None
        return entry if all(entry.get(k) == v for k, v in want.items()) else None

    return await eventually(check, attempts=400, every_s=0.05)


async def test_admin_api_keeps_headers_write_only_and_speaks_problem_json(env: Env) -> None:
    made = await register(env, high_risk_tools=["shout"])
    assert made["has_headers"] is True and "headers" not in made and "headers_enc" not in made
    for response in (
        await env.root.get("/admin/mcp-servers"),
        await env.root.get(f"/admin/mcp-servers/{made['id']}"),
    ):
        assert TOKEN not in response.text and "headers_enc" not in response.text
    listed = ok(await env.root.get("/admin/mcp-servers"))
    assert [s["name"] for s in listed["items"]] == ["calc"] and listed["next_cursor"] is None

    # Omitting the headers keeps them; {} clears them.
    body = {"name": "calc", "url": env.mcp.url, "enabled": True}
    assert ok(await env.root.put(f"/admin/mcp-servers/{made['id']}", json=body))["has_headers"] is True
    cleared = ok(await env.root.put(f"/admin/mcp-servers/{made['id']}", json={**body, "headers": {}}))
    assert cleared["has_headers"] is False

    problem(await env.root.post("/admin/mcp-servers", json={"name": "calc", "url": env.mcp.url}), 409)
    problem(await env.root.post("/admin/mcp-servers", json={"name": "Bad.Name", "url": env.mcp.url}), 422)
    problem(await env.root.post("/admin/mcp-servers", json={"name": "x", "url": "ftp://h"}), 422)
    bad_header = {"name": "y", "url": env.mcp.url, "headers": {"X": f"{TOKEN}\r\nb"}}
    refused = await env.root.post("/admin/mcp-servers", json=bad_header)
    problem(refused, 422)
    assert TOKEN not in refused.text  # not even a refused header comes back
    problem(await env.root.get("/admin/mcp-servers/mcp_nope"), 404)
    problem(await env.alice.get("/admin/mcp-servers"), 403)
    problem(await env.alice.post("/admin/mcp-servers", json={"name": "z", "url": env.mcp.url}), 403)
    assert (await env.root.delete(f"/admin/mcp-servers/{made['id']}")).status_code == 204
    assert ok(await env.root.get("/admin/mcp-servers"))["items"] == []


async def test_bridged_tools_are_listed_called_and_removed_live(env: Env) -> None:
    made = await register(env, high_risk_tools=["shout"])
    tools = await bridged(env, present=True)
    assert set(tools) == {"calc.add", "calc.shout"}
    add, shout = tools["calc.add"], tools["calc.shout"]
    assert add.service == "mcp" and add.title == "Add" and add.description == "Add two integers."
    assert add.annotations.read_only is True and add.annotations.idempotent is True
    assert add.annotations.open_world is False and add.annotations.destructive is None
    assert add.input_schema["required"] == ["a", "b"] and not add.high_risk
    assert shout.high_risk and shout.annotations.destructive is False

    client = env.tools.client
    reply = await client.call("calc.add", {"a": 2, "b": 40})
    assert reply.ok and reply.result == {"result": 42}, reply
    failed = await client.call("calc.shout", {"text": "fail"})
    assert not failed.ok and failed.error.code == "tool_error" and failed.error.message.startswith("calc.shout:")
    wrong = await client.call("calc.add", {"a": "two"})
    assert not wrong.ok and wrong.error.code == "tool_error", wrong

    entry = await status_of(env, "calc", state="connected", tools=2, calls=3)
    assert entry["errors"] == 2 and entry["avg_latency_ms"] > 0 and entry["connected"] is True

    # A filter change applies live, without a reconnect.
    body = {"name": "calc", "url": env.mcp.url, "deny_tools": ["shout"]}
    ok(await env.root.put(f"/admin/mcp-servers/{made['id']}", json=body))
    await eventually(lambda: _absent(env, "calc.shout"), attempts=300, every_s=0.05)
    denied = await client.call("calc.shout", {"text": "hi"})
    assert not denied.ok and denied.error.code == "unknown_tool"

    # Disabled: gone from list_tools at once on every replica; a caller holding the old list
    # gets a clear error, not a hang.
    stale = ToolClient(env.bus)
    assert "calc.add" in {t.name for t in await stale.list_tools()}
    ok(await env.root.put(f"/admin/mcp-servers/{made['id']}", json={**body, "enabled": False}))
    await bridged(env, present=False)
    gone = await stale.call("calc.add", {"a": 1, "b": 1}, timeout_s=5)
    assert not gone.ok and gone.error.code == "unavailable", gone
    relisted = await client.call("calc.add", {"a": 1, "b": 1}, timeout_s=5)
    assert not relisted.ok and relisted.error.code == "unknown_tool", relisted
    assert (await status_of(env, "calc", state="disabled"))["tools"] == 0

    # Enabled again: back.
    ok(await env.root.put(f"/admin/mcp-servers/{made['id']}", json={**body, "enabled": True}))
    await bridged(env, present=True)
    assert (await client.call("calc.add", {"a": 1, "b": 1})).result == {"result": 2}


async def _absent(env: Env, name: str) -> bool:
    return name not in {t.name for t in await env.tools.client.list_tools(timeout_s=2)}


async def test_wrong_headers_show_in_status_and_tools_fail_clearly(env: Env) -> None:
    await register(env, name="locked", headers={"Authorization": "Bearer wrong"})
    entry = await status_of(env, "locked", failing=True, state="down")
    assert entry["connected"] is False and "401" in entry["last_error"], entry
    assert not [t for t in await env.tools.client.list_tools() if t.name.startswith("locked.")]
    reply = await env.tools.client.call("locked.add", {"a": 1, "b": 2}, timeout_s=5)
    assert not reply.ok and reply.error.code in {"unavailable", "unknown_tool"}


async def test_a_killed_server_fails_clearly_and_the_bridge_reconnects(env: Env) -> None:
    await register(env)
    await bridged(env, present=True)
    client = env.tools.client
    assert (await client.call("calc.add", {"a": 1, "b": 2})).ok

    await env.mcp.kill()
    reply = await client.call("calc.add", {"a": 1, "b": 2})
    assert not reply.ok and reply.error.code == "unavailable", reply
    assert "calc" in reply.error.message
    down = await status_of(env, "calc", failing=True, state="down")
    assert down["last_error"] and down["tools"] == 2  # the last listing is kept while it is down
    # Listed still, so an agent's call gets this clear error rather than "no such tool".
    assert "calc.add" in {t.name for t in await client.list_tools()}
    later = await client.call("calc.add", {"a": 1, "b": 2})
    assert not later.ok and later.error.code == "unavailable" and "not connected" in later.error.message

    await env.mcp.start()  # the same port: the bridge finds it again by itself

    async def answered() -> ToolReply | None:
        r = await client.call("calc.add", {"a": 20, "b": 22}, timeout_s=5)
        return r if r.ok else None

    assert (await eventually(answered, attempts=300, every_s=0.05)).result == {"result": 42}
    await status_of(env, "calc", state="connected")


# ---- a DSL tool node and a ReAct agent, through the real dispatcher ---------------------------


def chain(*nodes: dict[str, Any]) -> dict[str, Any]:
    ids = [n["id"] for n in nodes]
    edges = [{"source": s, "target": d} for s, d in itertools.pairwise(ids)]
    return {"version": "1", "nodes": list(nodes), "edges": edges}


async def run_task(env: Env, dsl: dict[str, Any]) -> list[AnyEvent]:
    task = ok(await env.alice.post("/tasks", json={"dsl": dsl, "input": {"q": "shout hello"}}), 202)
    events: list[AnyEvent] = []
    async with asyncio.timeout(TIMEOUT_S):
        async for _, event in read_events(env.bus, task["id"], follow=True):
            events.append(event)
    return events


async def test_a_tool_node_and_a_react_agent_call_bridged_tools(env: Env) -> None:
    await register(env)
    await bridged(env, present=True)
    async with oai.OpenAIServer() as srv:
        config = ModelConfig(id="m", name="m", base_url=srv.url, model="m")
        await ControlPlane(env.bus).put("models.chain", ModelChain(revision=1, active="m", models={"m": config}))
        srv.script(
            [
                # The model knows the tool by an OpenAI-legal function name (no dots).
                oai.reply("Shouting.", tool_calls=[oai.tool_call("calc_shout", {"text": "hello"}, id="c1")]),
                oai.reply("HELLO it is."),
            ],
            model="m",
        )
        dsl = chain(
            {"id": "in", "kind": "input"},
            {"id": "total", "kind": "tool", "config": {"tool": "calc.add", "args": {"a": 20, "b": 22}}},
            {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.q }}", "tools": ["calc.shout"]}},
            {"id": "out", "kind": "output", "config": {"value": "{{ total.result }} / {{ ans }}"}},
        )
        async with dispatcher(env.settings):
            events = await run_task(env, dsl)

    assert events[-1].type == "done" and events[-1].status == "done", events[-1]
    assert events[-1].output["out"].startswith("42 / ")
    offered = {t["function"]["name"] for t in srv.requests()[0]["body"]["tools"]}
    assert offered == {"calc_shout"}
    fed_back = {m["tool_call_id"]: json.loads(m["content"]) for m in srv.requests()[1]["body"]["messages"]
                if m["role"] == "tool"}  # fmt: skip
    assert fed_back["c1"]["ok"] is True and fed_back["c1"]["result"] == {"result": "HELLO"}, fed_back
