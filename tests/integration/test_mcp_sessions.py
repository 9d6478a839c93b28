"""MCP sessions across gateway replicas, with the real MCP SDK client: the session's record lives
in JetStream KV and its notifications in a stream, so a session opened on one replica goes on on
another — requests, its subscriptions, and its GET stream, which resumes (`Last-Event-ID`) on the
other replica when the first one dies. `notifications/resources/updated` reaches the sessions
subscribed to a workflow that is edited, `notifications/tools/list_changed` those of its user."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from services.gateway.embedded import EmbeddedGateway, GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.test_tools_support import tools_and_gateway

DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}},
    ],
    "edges": [{"source": "in", "target": "out"}],
}
WAIT_S = 60.0  # a bound on a wait for something that must come, never a pace


class Replicas(httpx2.AsyncBaseTransport):
    """Sends each request to the replica currently chosen (one URL for the client, as behind a
    load balancer), and notes which replica served each GET stream and its `Last-Event-ID`."""

    def __init__(self, ports: dict[str, int], current: str) -> None:
        self.ports, self.current = ports, current
        self.inner = httpx2.AsyncHTTPTransport()
        self.gets: list[tuple[str, str | None]] = []
        self.get_opened: dict[str, asyncio.Event] = {name: asyncio.Event() for name in ports}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        replica = self.current
        request.url = request.url.copy_with(port=self.ports[replica])
        response = await self.inner.handle_async_request(request)
        if request.method == "GET":
            self.gets.append((replica, request.headers.get("last-event-id")))
            if response.status_code == 200:
                self.get_opened[replica].set()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Replica = EmbeddedGateway | GatewayProcess


@pytest.fixture
async def two_replicas(settings: Settings) -> AsyncIterator[tuple[Settings, Replica, Replica]]:
    """Two gateways on one NATS and one database: the first its own process (so it can die as a
    process does, its sockets closed), the second in this one."""
    async with tools_and_gateway(settings) as (cfg, _bus, _tools, base_url):
        first = await GatewayProcess(settings_env(cfg), free_port()).start()
        second = EmbeddedGateway(cfg, migrate=False)
        second.port = int(base_url.removesuffix("/api/v1").rsplit(":", 1)[1])
        try:
            yield cfg, first, second
        finally:
            await first.stop()


def api(settings: Settings, url: str, user: str) -> httpx.AsyncClient:
    token = mint_token(settings, user)
    return httpx.AsyncClient(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30)


async def next_matching(queue: asyncio.Queue[Any], wanted: Callable[[Any], bool]) -> Any:
    async def find() -> Any:
        while True:
            item = await queue.get()
            if wanted(item):
                return item

    return await asyncio.wait_for(find(), WAIT_S)


async def collect_until(queue: asyncio.Queue[Any], last: Callable[[Any], bool]) -> list[Any]:
    """Everything that came, up to and with the first `last`."""
    seen: list[Any] = []

    def note(item: Any) -> bool:
        seen.append(item)
        return last(item)

    await next_matching(queue, note)
    return seen


def is_update(uri: str) -> Callable[[Any], bool]:
    return lambda n: isinstance(n, types.ResourceUpdatedNotification) and str(n.params.uri) == uri


async def test_a_session_moves_between_replicas_and_its_stream_resumes(
    two_replicas: tuple[Settings, Replica, Replica],
) -> None:
    cfg, first, second = two_replicas
    async with api(cfg, first.url, "alice") as http:
        saved = await http.post("/workflows", json={"name": "echo", "dsl": DSL})
        assert saved.status_code == 201, saved.text
    wf_id = saved.json()["id"]
    uri = f"agentix://workflows/{wf_id}"
    notes: asyncio.Queue[Any] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        await notes.put(message)

    router = Replicas({"a": first.port, "b": second.port}, "a")
    headers = {"Authorization": f"Bearer {mint_token(cfg, 'alice')}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, transport=router) as client,
        streamable_http_client(f"{first.url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        init = await session.initialize()
        caps = init.capabilities
        assert caps.resources is not None and caps.resources.subscribe is True
        assert caps.tools is not None and caps.tools.list_changed is True
        await session.subscribe_resource(uri)
        await asyncio.wait_for(router.get_opened["a"].wait(), WAIT_S)  # the GET stream is on replica a

        router.current = "b"  # the load balancer now sends the session elsewhere
        listed = await session.list_tools()
        assert f"workflow.{wf_id}" in {t.name for t in listed.tools}
        read_back = await session.read_resource(uri)
        assert json.loads(read_back.contents[0].text)["nodes"][0]["id"] == "in"  # type: ignore[union-attr]

        await first.stop()  # replica a goes with the GET stream on it; the client reconnects to b
        await asyncio.wait_for(router.get_opened["b"].wait(), WAIT_S)
        replica, last_event_id = router.gets[-1]
        assert replica == "b" and last_event_id is not None and last_event_id.isdigit()

        async with api(cfg, second.url, "alice") as http:
            edited = await http.put(f"/workflows/{wf_id}", json={"name": "echo 2", "dsl": DSL})
            assert edited.status_code == 200, edited.text
        # Published in this order: the tool list changed (title), the resource list, the resource.
        before = await collect_until(notes, is_update(uri))
        assert any(isinstance(n, types.ToolListChangedNotification) for n in before)

        await session.unsubscribe_resource(uri)
        async with api(cfg, second.url, "alice") as http:
            assert (await http.put(f"/workflows/{wf_id}", json={"name": "echo 3", "dsl": DSL})).status_code == 200
            assert (await http.post("/workflows", json={"name": "marker", "dsl": DSL})).status_code == 201
        # In order: the edit's list changes (its `resources/updated` not sent: unsubscribed), then
        # the new workflow's tool list change.
        changes = 0

        def second_list_change(n: Any) -> bool:
            nonlocal changes
            changes += isinstance(n, types.ToolListChangedNotification)
            return changes == 2

        after = await collect_until(notes, second_list_change)
        assert not any(isinstance(n, types.ResourceUpdatedNotification) for n in after), after


async def _sse(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(id, data) of each SSE event with data."""
    event_id, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif line == "":
            if data:
                yield event_id, data
            event_id, data = "", ""


async def until(events: AsyncIterator[tuple[str, str]], wanted: dict[str, Any]) -> str:
    """The id of the first event whose message is `wanted`."""
    async def find() -> str:
        async for event_id, data in events:
            if json.loads(data) == wanted:
                return event_id
        raise AssertionError(f"the stream ended before {wanted}")

    return await asyncio.wait_for(find(), WAIT_S)


def _rpc(method: str, params: dict[str, Any] | None = None, rid: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return message


class RawSession:
    """The wire, for what the SDK client does not let a test choose (where a GET goes, with which
    `Last-Event-ID`, a session id of someone else's)."""

    HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}

    def __init__(self, settings: Settings, user: str) -> None:
        self.auth = {"Authorization": f"Bearer {mint_token(settings, user)}"}
        self.http = httpx.AsyncClient(timeout=30)
        self.session_id = ""

    async def initialize(self, url: str) -> None:
        opened = await self.http.post(f"{url}/mcp", headers={**self.HEADERS, **self.auth}, json=_rpc("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}))
        assert opened.status_code == 200, opened.text
        self.session_id = opened.headers["mcp-session-id"]
        done = await self.post(url, _rpc("notifications/initialized", rid=None))
        assert done.status_code == 202, done.text

    async def post(self, url: str, message: dict[str, Any], session_id: str | None = None) -> httpx.Response:
        headers = {**self.HEADERS, **self.auth, "Mcp-Session-Id": session_id or self.session_id}
        return await self.http.post(f"{url}/mcp", headers=headers, json=message)

    def get(self, url: str, last_event_id: str | None = None) -> Any:
        headers = {**self.auth, "Accept": "text/event-stream", "Mcp-Session-Id": self.session_id}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return self.http.stream("GET", f"{url}/mcp", headers=headers)


async def test_a_get_stream_resumes_on_another_replica_from_its_last_event_id(
    two_replicas: tuple[Settings, Replica, Replica],
) -> None:
    cfg, first, second = two_replicas
    raw = RawSession(cfg, "bob")
    async with api(cfg, first.url, "bob") as http, contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(raw.http.aclose)
        wf_id = (await http.post("/workflows", json={"name": "one", "dsl": DSL})).json()["id"]
        uri = f"agentix://workflows/{wf_id}"
        await raw.initialize(first.url)
        subscribed = await raw.post(second.url, _rpc("resources/subscribe", {"uri": uri}))
        assert subscribed.status_code == 200 and "error" not in subscribed.json(), subscribed.text

        update = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
        async with raw.get(first.url) as stream:
            assert stream.status_code == 200
            events = _sse(stream)
            assert (await http.put(f"/workflows/{wf_id}", json={"name": "v2", "dsl": DSL})).status_code == 200
            first_id = await until(events, update)
        # Disconnected: what is published now is kept for the session.
        assert (await http.put(f"/workflows/{wf_id}", json={"name": "v3", "dsl": DSL})).status_code == 200
        async with raw.get(second.url, last_event_id=first_id) as stream:
            assert stream.status_code == 200
            events = _sse(stream)
            # The edit made while away, from its first notification on: nothing before, nothing skipped.
            resumed_id, data = await asyncio.wait_for(anext(events), WAIT_S)
            assert int(resumed_id) > int(first_id)
            assert json.loads(data) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            assert int(await until(events, update)) > int(resumed_id)

        # Another user's requests with this session id answer as an unknown session's.
        eve = RawSession(cfg, "eve")
        stack.push_async_callback(eve.http.aclose)
        assert (await eve.post(second.url, _rpc("ping"), session_id=raw.session_id)).status_code == 404
        async with eve.http.stream("GET", f"{second.url}/mcp", headers={
                **eve.auth, "Accept": "text/event-stream", "Mcp-Session-Id": raw.session_id}) as stream:
            assert stream.status_code == 404
        # A resumption point that is not an event id is refused, not guessed.
        async with raw.get(second.url, last_event_id="nope") as stream:
            assert stream.status_code == 400
        # DELETE ends the session on every replica.
        ended = await raw.http.delete(f"{first.url}/mcp", headers={**raw.auth, "Mcp-Session-Id": raw.session_id})
        assert ended.status_code == 204
        gone = await raw.post(second.url, _rpc("ping"))
        assert gone.status_code == 404 and gone.json()["error"]["message"] == "Session not found"


async def test_subscribing_needs_a_session_and_an_agentix_resource(
    two_replicas: tuple[Settings, Replica, Replica],
) -> None:
    cfg, first, _second = two_replicas
    raw = RawSession(cfg, "carol")
    try:
        await raw.initialize(first.url)
        foreign = await raw.post(first.url, _rpc("resources/subscribe", {"uri": "file:///etc/passwd"}))
        assert foreign.json()["error"]["code"] == types.INVALID_PARAMS
        headers = {**raw.HEADERS, **raw.auth}  # no session: the stateless way in
        subscribe = _rpc("resources/subscribe", {"uri": "agentix://workflows/x"})
        sessionless = await raw.http.post(f"{first.url}/mcp", headers=headers, json=subscribe)
        assert "Mcp-Session-Id" in sessionless.json()["error"]["message"]
        no_session_get = await raw.http.get(f"{first.url}/mcp", headers={**raw.auth, "Accept": "text/event-stream"})
        assert no_session_get.status_code == 400
    finally:
        await raw.http.aclose()
