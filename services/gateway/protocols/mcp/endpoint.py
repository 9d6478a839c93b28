"""`/mcp` on the gateway: the MCP Streamable HTTP endpoint, stateless with JSON responses (any
gateway replica answers any request; a restart loses nothing).

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
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from services.gateway.access.admission import admit
from services.gateway.access.principal import Principal
from services.gateway.middleware.body_limits import JSON_LIMIT
from services.gateway.middleware.common import header, read_body, replay_body, send_problem, state
from services.gateway.problems import ApiProblem
from services.gateway.protocols.mcp.discovery import challenge, discovery_routes
from services.gateway.protocols.mcp.origins import refusal

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
        # POST only: stateless, there is no server-to-client stream to GET and no session to
        # DELETE; both are 405, as the transport's spec allows.
        self.route = Route(PATH, self, methods=["POST"], include_in_schema=False)

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
        await transport.tools.prepare(principal, header(scope, b"mcp-method"), header(scope, b"mcp-name"))
        await transport.handle(sessions, scope, receive, send)


class McpTransport:
    """The SDK's session manager, started at first use by a task of its own (which holds its task
    group for the lifespan) and stopped by `close`. A new one per lifespan: the manager runs once."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._sessions: StreamableHTTPSessionManager | None = None
        self._streaming: StreamableHTTPSessionManager | None = None
        self._server: Server[Any] | None = None
        self.tools: McpTools | None = None
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

                tools = McpTools(self.app)
                server = build_server(tools, McpReads(self.app))
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
        rest = await serve_single(self._server, scope, receive, send)
        if rest is not None:
            await sessions.handle_request(scope, rest, send)

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
    if b"notifications/cancelled" not in body and b"progressToken" not in body and b"/logLevel" not in body:
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
