"""`/mcp` on the gateway: the MCP Streamable HTTP endpoint. Every request is served on its own
(the SDK's stateless transport, JSON responses); a handshake-era `initialize` also opens a
session whose record lives in JetStream KV (`sessions.py`), so any gateway replica answers any
request of any session and a restart loses nothing. `GET /mcp` with the session's id is its
notification stream (`notifications.py`), resumable on any replica; `DELETE` ends the session.

The MCP SDK is large and most gateways never see an MCP client: the transport is built and
started by the first `/mcp` request, and stopped with the gateway's lifespan.

The gateway's outer middleware applies as to every route (recovery, tracing, request id,
metrics and access log, audit of every POST, CORS, body limits). Authentication and the rate
limit, which the API applies under `/api/v1` only, are applied here: the same bearer token (or
an API key with scope `mcp`) and the same per-user budget. The tier-1 guardrail guards task
input and does not apply to tool calls."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from services.gateway.access.admission import admit
from services.gateway.access.principal import Principal
from services.gateway.middleware.body_limits import JSON_LIMIT
from services.gateway.middleware.common import header, read_body, replay_body, send_problem, state
from services.gateway.problems import ApiProblem
from services.gateway.protocols.mcp.discovery import challenge, discovery_routes
from services.gateway.protocols.mcp.origins import refusal
from services.gateway.protocols.mcp.sessions import McpSessions, peek_initialize

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from services.gateway.protocols.mcp.server import McpTools

PATH = "/mcp"
# The SDK logs every stateless request's transport teardown at INFO; the access log has the request.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


class McpEndpoint:
    """ASGI app of the `/mcp` route: bearer auth and rate limit, then the MCP SDK (`McpTransport.handle`)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        # POST for messages; GET a session's notification stream; DELETE ends a session.
        self.route = Route(PATH, self, methods=["POST", "GET", "DELETE"], include_in_schema=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # FastAPI's router names only its own routes in the scope; metrics and the access log
        # label requests by it.
        scope.setdefault("route", self.route)
        st = self.app.state
        refused = refusal(st.settings, header(scope, b"host"), header(scope, b"origin"))
        if refused is not None:  # DNS rebinding: before the token, before anything else
            await send_problem(scope, receive, send, ApiProblem(403, "Forbidden", refused))
            return
        try:
            # The token as `Authorization: Bearer …`, or as an API key (`X-API-Key`, as `/lg` takes it).
            authorization = header(scope, b"authorization")
            api_key = header(scope, b"x-api-key")
            if not authorization and api_key:
                authorization = f"Bearer {api_key}"
            principal = await admit(st, scope, authorization, ("mcp",))
        except ApiProblem as problem:
            if problem.http_status == 401:  # where to learn how to authenticate (RFC 9728)
                problem.headers = {**(problem.headers or {}), "WWW-Authenticate": challenge(scope)}
            await send_problem(scope, receive, send, problem)
            return
        transport: McpTransport | None = getattr(st, "mcp_transport", None)
        sessions = await transport.sessions() if transport is not None else None
        if sessions is None or transport is None or transport.tools is None:
            await send_problem(scope, receive, send, ApiProblem(503, "Service Unavailable", "MCP is not running."))
            return
        session_id = header(scope, b"mcp-session-id")
        if scope["method"] != "POST" or session_id is not None:
            store = transport.session_store()
            if store is None:
                down = ApiProblem(503, "Service Unavailable", "The message bus is not connected; try again shortly.")
                await send_problem(scope, receive, send, down)
                return
            if session_id is None:
                await _rpc_error(scope, receive, send, 400, f"{scope['method']} /mcp needs the Mcp-Session-Id that "
                                 "initialize answered with.")  # fmt: skip
                return
            record = await store.owned(session_id, principal.id)
            if record is None:  # unknown, ended, expired, or another user's: the spec's 404
                await _rpc_error(scope, receive, send, 404, "Session not found")
                return
            if scope["method"] == "DELETE":
                await store.end(session_id)
                await Response(status_code=204)(scope, receive, send)
                return
            if scope["method"] == "GET":
                await _stream(st.bus, store, session_id, record, scope, receive, send)
                return
            state(scope)["mcp_session"] = session_id
        await transport.tools.prepare(principal, header(scope, b"mcp-method"), header(scope, b"mcp-name"))
        await transport.handle(sessions, scope, receive, send)


async def _stream(bus: Any, store: McpSessions, session_id: str, record: Any, scope: Scope, receive: Receive,
                  send: Send) -> None:  # fmt: skip
    from services.gateway.protocols.mcp.notifications import serve_stream, start_after

    if "text/event-stream" not in (header(scope, b"accept") or ""):
        await _rpc_error(scope, receive, send, 406, "GET /mcp is an event stream: accept text/event-stream.")
        return
    after = start_after(record, header(scope, b"last-event-id"))
    if after is None:
        await _rpc_error(scope, receive, send, 400, "Last-Event-ID is not an event id of this server.")
        return
    await serve_stream(bus, store, session_id, record, after, scope, receive, send)


async def _rpc_error(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """The transport's own error shape (a JSON-RPC error without an id), as the SDK answers."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    await Response(json.dumps(body), status_code=status, media_type="application/json")(scope, receive, send)


class McpTransport:
    """The SDK's session manager, started at first use by a task of its own (which holds its task
    group for the lifespan) and stopped by `close`. A new one per lifespan: the manager runs once."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._sessions: StreamableHTTPSessionManager | None = None
        self._streaming: StreamableHTTPSessionManager | None = None
        self._server: Server[Any] | None = None
        self.tools: McpTools | None = None
        self._store: McpSessions | None = None
        self._runner: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._closing = asyncio.Event()

    async def sessions(self) -> StreamableHTTPSessionManager | None:
        """The running manager; None once the lifespan is over."""
        async with self._starting:
            if self._sessions is None and not self._closing.is_set():
                from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

                from services.gateway.protocols.mcp.reads import McpReads
                from services.gateway.protocols.mcp.server import McpTools, build_server
                from services.gateway.protocols.mcp.subscriptions import McpSubscriptions

                tools = McpTools(self.app)
                server = build_server(tools, McpReads(self.app), McpSubscriptions(self.session_store))
                sessions = StreamableHTTPSessionManager(
                    app=server, stateless=True, json_response=True, max_request_body_size=JSON_LIMIT
                )
                streaming = StreamableHTTPSessionManager(
                    app=server, stateless=True, json_response=False, max_request_body_size=JSON_LIMIT
                )
                started = asyncio.get_running_loop().create_future()
                self._runner = asyncio.create_task(self._run(sessions, streaming, started), name="mcp transport")
                await started  # raises what the start raised
                self._sessions, self._streaming, self._server, self.tools = sessions, streaming, server, tools
        return None if self._closing.is_set() else self._sessions

    def session_store(self) -> McpSessions | None:
        """The sessions' records, over the gateway's current bus; None while it is not connected."""
        bus = getattr(self.app.state, "bus", None)
        if bus is None or not bus.nc.is_connected:
            return None
        if self._store is None or self._store.bus is not bus:
            self._store = McpSessions(bus)
        return self._store

    async def handle(self, sessions: StreamableHTTPSessionManager, scope: Scope, receive: Receive,
                     send: Send) -> None:  # fmt: skip
        """One POST: a workflow call that asked for progress by the SDK's transport in its SSE mode
        (the notifications ride the POST's stream); a `notifications/cancelled` also told to every
        replica; a handshake-era POST of one request in its own task (`single_exchange`);
        everything else by the SDK's transport."""
        from services.gateway.protocols.mcp.single_exchange import serve_single

        assert self._server is not None and self._streaming is not None and self.tools is not None
        body = await read_body(receive)
        receive = await replay_body(body, receive)
        message = _peek(body)
        if message.get("method") == "notifications/cancelled":
            request_id = (message.get("params") or {}).get("requestId")
            principal = state(scope).get("principal")
            if isinstance(request_id, str | int) and isinstance(principal, Principal):
                await self.tools.workflows.cancel_request(principal, request_id)
        elif _wants_progress(message):
            await self._streaming.handle_request(scope, receive, send)
            return
        opening = peek_initialize(message)
        store = self.session_store()
        if opening is not None and store is not None and header(scope, b"mcp-session-id") is None:
            await self._open_session(store, opening, sessions, scope, receive, send)
            return
        rest = await serve_single(self._server, scope, receive, send)
        if rest is not None:
            await sessions.handle_request(scope, rest, send)

    async def _open_session(self, store: McpSessions, opening: tuple[str, dict[str, Any], dict[str, Any]],
                            sessions: StreamableHTTPSessionManager, scope: Scope, receive: Receive,
                            send: Send) -> None:  # fmt: skip
        """`initialize`: the SDK answers it; the answer carries the new session's id. A refused
        `initialize` leaves no session behind."""
        principal = state(scope)["principal"]
        session_id = await store.create(principal.id, *opening)
        status = 0

        async def with_session(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if status < 400:
                    message = {**message, "headers": [*message.get("headers", []),
                                                      (b"mcp-session-id", session_id.encode())]}  # fmt: skip
            await send(message)

        try:
            await sessions.handle_request(scope, receive, with_session)
        finally:
            if not 0 < status < 400:
                await store.end(session_id)

    async def _run(self, sessions: StreamableHTTPSessionManager, streaming: StreamableHTTPSessionManager,
                   started: asyncio.Future[None]) -> None:  # fmt: skip
        try:
            async with sessions.run(), streaming.run():
                started.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
                return
            raise

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner


def _peek(body: bytes) -> dict[str, Any]:
    """The JSON-RPC message of a POST, to route it; anything else ({}) is the SDK's to refuse."""
    if not any(word in body for word in (b"notifications/cancelled", b"progressToken", b"/logLevel", b'"initialize"')):
        return {}  # most POSTs: not parsed twice
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _wants_progress(message: dict[str, Any]) -> bool:
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    streamed = isinstance(meta, dict) and ("progressToken" in meta or "io.modelcontextprotocol/logLevel" in meta)
    return streamed and (
        str(params.get("name", "")).startswith("workflow.") or params.get("name") == "ask_agent")


def mount_mcp(app: FastAPI) -> None:
    """Serve MCP at `/mcp`; its transport lives within the gateway's lifespan."""
    # First in the table: the router tries routes in order, and every MCP message is a request.
    app.router.routes.insert(0, McpEndpoint(app).route)
    app.router.routes[1:1] = discovery_routes()  # ahead of the console's catch-all
    inner: Callable[[Any], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(target: Any) -> AsyncIterator[Any]:
        transport = McpTransport(app)
        async with inner(target) as lifespan_state:
            app.state.mcp_transport = transport
            try:
                yield lifespan_state
            finally:
                app.state.mcp_transport = None
                await transport.close()

    app.router.lifespan_context = lifespan
