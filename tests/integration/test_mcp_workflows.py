"""The caller's saved workflows as MCP tools, with the real MCP SDK client against a real gateway
and dispatcher and a scripted model: listed with their input schema and an output schema, a call
runs the workflow as a task and streams `notifications/progress` (per node, per token batch) when
the client sent a progress token, a cancelled call cancels its task, and an approval step ends
the call naming the task. Another user's workflow is an unknown tool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.tools import ToolRegistry, serve_tools
from shared.settings import Settings
from tests.integration.conftest import scripted_settings
from tests.integration.test_mcp_server import mcp_session
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

GATE = "mcp-held"
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input", "config": {"schema": SCHEMA}},
              {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
              {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}}],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}
APPROVAL_DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"},
              {"id": "ok", "kind": "approval", "config": {"message": "go?"}},
              {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}}],
    "edges": [{"source": "in", "target": "ok"}, {"source": "ok", "target": "out"}],
}
ANSWER = "Trains are booked for journeys under four hours; flights need a manager's approval. " * 3


class Stack:
    def __init__(self, settings: Settings, url: str) -> None:
        self.settings, self.url = settings, url

    def api(self, user: str) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {mint_token(self.settings, user)}"}
        return httpx.AsyncClient(base_url=f"{self.url}/api/v1", headers=headers, timeout=30)

    def session(self, user: str) -> contextlib.AbstractAsyncContextManager[Any]:
        return mcp_session(f"{self.url}/mcp", mint_token(self.settings, user))

    async def save(self, user: str, name: str, dsl: dict[str, Any]) -> str:
        async with self.api(user) as http:
            saved = await http.post("/workflows", json={"name": name, "dsl": dsl})
            assert saved.status_code == 201, saved.text
            return str(saved.json()["id"])


@pytest.fixture
async def stack(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer) -> AsyncIterator[Stack]:
    settings = scripted_settings(nats_server, tmp_path, srv, rate_limit_per_min=100_000,
                                 guardrail_blocklist=["plutonium"])
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    tools = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
    gateway = await EmbeddedGateway(settings).start()
    try:
        async with dispatcher(settings):
            yield Stack(settings, gateway.url)
    finally:
        async with httpx.AsyncClient() as http:  # no held answer outlives the test
            await http.post(srv.url.removesuffix("/v1") + "/_release", json={"gate": GATE})
        await gateway.stop()
        for server in tools:
            await server.drain()
        await bus.close()


async def test_a_workflow_is_a_tool_that_streams_progress(stack: Stack, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER, chunk_chars=2)])
    wf_id = await stack.save("alice", "travel answer", DSL)
    async with stack.session("alice") as alice, stack.session("bob") as bob:
        listed = {t.name: t for t in (await alice.list_tools()).tools}
        tool = listed[f"workflow.{wf_id}"]
        assert tool.title == "travel answer" and tool.input_schema == SCHEMA
        assert tool.output_schema is not None and tool.output_schema["required"] == ["task_id", "status"]
        assert tool.annotations is not None and tool.annotations.read_only_hint is False
        assert f"workflow.{wf_id}" not in {t.name for t in (await bob.list_tools()).tools}

        seen: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, message))

        done = await alice.call_tool(f"workflow.{wf_id}", {"text": "How do I travel?"}, progress_callback=on_progress)
        assert not done.is_error, done.content
        assert done.structured_content is not None
        assert done.structured_content["status"] == "done" and done.structured_content["output"] == {"out": ANSWER}
        [block] = done.content
        assert isinstance(block, types.TextContent) and block.text == ANSWER
        messages = [m or "" for _, m in seen]
        assert messages[0].startswith("task ") and messages[0].endswith(" submitted")
        assert any(m == "node ans done" for m in messages) and any("tokens" in m for m in messages)
        assert [p for p, _ in seen] == sorted(p for p, _ in seen)  # increasing, as the spec asks

        # without a progress token: the same call, answered as JSON
        srv.script([oai.reply("short")])
        quiet = await alice.call_tool(f"workflow.{wf_id}", {"text": "again"})
        assert quiet.structured_content is not None and quiet.structured_content["output"] == {"out": "short"}

        bad = await alice.call_tool(f"workflow.{wf_id}", {"wrong": 1})  # the input schema applies
        assert bad.is_error and "text" in str(bad.content[0])
        blocked = await alice.call_tool(f"workflow.{wf_id}", {"text": "buy plutonium"})  # tier-1 guardrail
        assert blocked.is_error and "guardrail" in str(blocked.content[0])
        stolen = await bob.call_tool(f"workflow.{wf_id}", {"text": "x"})
        assert stolen.is_error and "Unknown tool" in str(stolen.content[0])


async def test_cancelling_the_call_cancels_its_task(stack: Stack, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER, gate=GATE, gate_after=1)])  # holds the answer after its first chunk
    wf_id = await stack.save("alice", "held", DSL)
    submitted: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message and message.endswith(" submitted") and not submitted.done():
            submitted.set_result(message.split()[1])

    async with stack.session("alice") as alice:
        call = asyncio.create_task(
            alice.call_tool(f"workflow.{wf_id}", {"text": "wait"}, progress_callback=on_progress))
        task_id = await asyncio.wait_for(submitted, 60)
        async with stack.api("alice") as http:
            async def running() -> bool:
                return (await http.get(f"/tasks/{task_id}")).json()["status"] == "running"

            await eventually(running, attempts=3000, every_s=0.02)
            call.cancel()  # the SDK sends notifications/cancelled for the request
            with contextlib.suppress(asyncio.CancelledError):
                await call

            async def cancelled() -> bool:
                return (await http.get(f"/tasks/{task_id}")).json()["status"] == "cancelled"

            await eventually(cancelled, attempts=3000, every_s=0.02)
        assert (await alice.send_ping()) is not None  # the session goes on


async def test_an_approval_ends_the_call_naming_the_task(stack: Stack) -> None:
    wf_id = await stack.save("alice", "needs approval", APPROVAL_DSL)
    async with stack.session("alice") as alice:
        parked = await alice.call_tool(f"workflow.{wf_id}", {"text": "go"}, progress_callback=_ignore)
    assert parked.structured_content is not None and parked.structured_content["status"] == "waiting"
    task_id = parked.structured_content["task_id"]
    [block] = parked.content
    assert isinstance(block, types.TextContent)
    assert task_id in block.text and f"/api/v1/tasks/{task_id}/approval" in block.text and "go?" in block.text


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    return None


async def test_ask_agent_answers_and_goes_on_in_its_conversation(stack: Stack, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply("Take the train."), oai.reply("Yes, under four hours.")])
    async with stack.session("alice") as alice:
        tool = {t.name: t for t in (await alice.list_tools()).tools}["ask_agent"]
        assert tool.input_schema["required"] == ["text"] and tool.output_schema is not None
        first = await alice.call_tool("ask_agent", {"text": "How do I get to Hamburg?", "mode": "direct"},
                                      progress_callback=_ignore)  # fmt: skip
        assert not first.is_error, first.content
        assert first.structured_content is not None and first.structured_content["status"] == "done"
        conversation_id = first.structured_content["conversation_id"]
        assert "Take the train." in str(first.content[0])
        second = await alice.call_tool("ask_agent", {"text": "Even by train?", "mode": "direct",
                                                     "conversation_id": conversation_id})  # fmt: skip
        assert second.structured_content is not None and second.structured_content["conversation_id"] == conversation_id
        assert "Yes, under four hours." in str(second.content[0])
        bad = await alice.call_tool("ask_agent", {"text": "x", "mode": "shout"})
        assert bad.is_error and "mode" in str(bad.content[0])
    async with stack.api("alice") as http:
        said = (await http.get(f"/conversations/{conversation_id}/messages")).json()["items"]
        assert [m["role"] for m in said] == ["user", "assistant", "user", "assistant"]
    async with stack.session("bob") as bob:  # another user's conversation is not reachable
        other = await bob.call_tool("ask_agent", {"text": "hi", "conversation_id": conversation_id})
        assert other.is_error


async def test_a_streamed_call_carries_the_runs_log_lines(stack: Stack, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply("Logged.")])
    wf_id = await stack.save("alice", "logged", DSL)
    lines: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        lines.append(params)

    headers = {"Authorization": f"Bearer {mint_token(stack.settings, 'alice')}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{stack.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, logging_callback=on_log) as session,
    ):
        await session.initialize()
        done = await session.call_tool(f"workflow.{wf_id}", {"text": "log it"}, progress_callback=_ignore)
    assert not done.is_error, done.content
    events = [(p.data["event"], p.data["node"]) for p in lines if isinstance(p.data, dict)]
    assert ("node.start", "ans") in events and ("node.end", "ans") in events, events
    assert all(p.logger == "agentix.run" and p.level == "info" for p in lines)
