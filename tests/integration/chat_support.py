"""A chat stack for tests: tool services with empty registries, a dispatcher and one or more
gateway replicas on one NATS deployment and one database; clients per user; run helpers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.tools import ToolRegistry, serve_tools
from shared.settings import Settings
from tests.conftest import drop_deployment
from tests.integration.test_tools_support import InProcess, Tools
from tests.support.dispatcher import dispatcher

WAIT_S = 90.0
ENDED = frozenset({"succeeded", "failed", "cancelled", "interrupted", "budget_exceeded"})


@dataclass
class Frame:
    id: int | None
    event: str
    data: dict[str, Any]


@dataclass
class ChatStack:
    settings: Settings
    gateways: list[EmbeddedGateway] = field(default_factory=list)
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def client(self, user: str | None = None, replica: int = 0, admin: bool = False) -> httpx.AsyncClient:
        name = user or f"u{uuid.uuid4().hex[:8]}"
        headers = {"Authorization": f"Bearer {mint_token(self.settings, name, admin=admin)}"}
        client = httpx.AsyncClient(base_url=self.gateways[replica].url, headers=headers, timeout=30)
        self.clients.append(client)
        return client


@contextlib.asynccontextmanager
async def chat_stack(settings: Settings, replicas: int = 1, with_dispatcher: bool = True,
                     tools: ToolRegistry | None = None, real_tools: bool = False) -> AsyncIterator[ChatStack]:
    """`tools`: the tool service `go`'s registry (default: none, so `list_tools` answers at once);
    `real_tools`: the real tool services instead (knowledge bases, ingestion…)."""
    settings = settings.model_copy(update={"rate_limit_per_min": 100_000})
    bus = await Bus.connect(settings, name="chat-test")
    await bus.declare()
    services = [] if real_tools else [await serve_tools(bus, tools or ToolRegistry("go")),
                                      await serve_tools(bus, ToolRegistry("py"))]
    stack = ChatStack(settings)
    try:
        async with contextlib.AsyncExitStack() as stack_exit:
            if real_tools:
                running = await InProcess(settings).start()
                stack_exit.push_async_callback(running.stop)
                await Tools(bus).ready()
            if with_dispatcher:
                await stack_exit.enter_async_context(dispatcher(settings))
            for _ in range(replicas):  # one after the other: the first one migrates the database
                gateway = await EmbeddedGateway(settings).start()
                stack_exit.push_async_callback(gateway.stop)
                stack.gateways.append(gateway)
            try:
                yield stack
            finally:
                for client in stack.clients:
                    await client.aclose()
    finally:
        for service in services:
            await service.drain()
        await drop_deployment(bus)
        await bus.close()


async def new_conversation(client: httpx.AsyncClient, **body: Any) -> str:
    resp = await client.post("/api/v1/conversations", json=body)
    assert resp.status_code == 201, resp.text
    return resp.json()["id"]


async def say(client: httpx.AsyncClient, conversation: str, text: str, **extra: Any) -> dict[str, Any]:
    resp = await client.post(f"/api/v1/conversations/{conversation}/messages", json={"text": text, **extra})
    assert resp.status_code == 202, resp.text
    return resp.json()


async def frames(client: httpx.AsyncClient, run_id: str, until: str | None = "done") -> AsyncIterator[Frame]:
    """The run's SSE events, from the start; stops after the first `until` event."""
    async with client.stream("GET", f"/api/v1/runs/{run_id}/events") as resp:
        assert resp.status_code == 200, await resp.aread()
        fields: dict[str, str] = {}
        async for line in resp.aiter_lines():
            if line == "":
                if "data" in fields and fields.get("event") != "heartbeat":  # liveness, not the run's
                    frame = Frame(int(fields["id"]) if "id" in fields else None, fields.get("event", "message"),
                                  json.loads(fields["data"]))
                    yield frame
                    if frame.event == until:
                        return
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value


async def events_of(client: httpx.AsyncClient, run_id: str) -> list[Frame]:
    async with asyncio.timeout(WAIT_S):
        return [f async for f in frames(client, run_id)]


async def run_state(client: httpx.AsyncClient, run_id: str, states: frozenset[str] | set[str]) -> dict[str, Any]:
    """The run once its recorded state is one of `states` (the recorder follows the stream)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            body = (await client.get(f"/api/v1/runs/{run_id}")).json()
            if body["state"] in states:
                return body
            await asyncio.sleep(0.05)


async def thread(client: httpx.AsyncClient, conversation: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/api/v1/conversations/{conversation}/messages", params={"limit": 200})
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]
