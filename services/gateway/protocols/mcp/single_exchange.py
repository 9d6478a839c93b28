"""A handshake-era MCP request (protocol 2025-11-25 and before: a client that called `initialize`)
served in its POST's own task, the way the SDK serves a 2026-07-28 request.

For such a POST the SDK's stateless transport builds a transport with its memory streams, a
JSON-RPC dispatcher, a server loop and their tasks, and tears them all down after the one
exchange. In a profile of the gateway under `bench/mcp.py` that machinery held the GIL over three
times as long as our handler did: a third of the gateway's CPU on `/mcp`. A 2026-era request the
SDK serves with `serve_one` (its kernel: method validation, server middleware, the handler, the
result's wire shape) in the request's own task; a handshake-era POST that is exactly one
JSON-RPC request, with the headers the transport requires, is served here the same way, with the
SDK's kernel and wire models. Everything else — `initialize`, notifications, a batch, a malformed
body, a missing or wrong header — goes to the SDK's transport, so every refusal stays its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse, RequestId
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from services.gateway.middleware.common import replay_body

# What `server.lifespan` yields: the server is built without a lifespan of its own (the SDK's
# default yields an empty dict), so there is no state for the manager to share with this path.
LIFESPAN_STATE: dict[str, Any] = {}


@dataclass
class _OneExchange:
    """The SDK's `DispatchContext` for one POST answered with one JSON body: no back channel (a
    stateless server cannot ask the client anything), and a notification has no wire to go on
    (as in the SDK's JSON-response mode)."""

    transport: TransportContext
    request_id: RequestId
    message_metadata: ServerMessageMetadata
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:  # fmt: skip
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        return None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


def _eligible(request: Request) -> str | None:
    """The request's handshake-era protocol version if its headers are what the SDK's transport
    accepts without a word (JSON accepted, a JSON body); None sends it to the transport."""
    version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None  # absent (the transport's default applies) or another era
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json" or not check_accept_headers(request)[0]:
        return None
    return version


def _one_request(body: bytes) -> JSONRPCRequest | None:
    try:
        decoded = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(decoded, dict) or "id" not in decoded or decoded.get("method") == "initialize":
        return None  # a notification or response (202), a batch, or the handshake: the transport's
    try:
        return JSONRPCRequest.model_validate(decoded, by_name=False)
    except ValidationError:
        return None


async def serve_single(server: Server[Any], scope: Scope, receive: Receive, send: Send) -> Receive | None:
    """Answer the POST if it is one handshake-era request, and return None; else return the
    `receive` with which the SDK's transport reads it (what was read of it replayed)."""
    request = Request(scope, receive)
    version = _eligible(request)
    if version is None:
        return receive
    body = await request.body()
    req = _one_request(body)
    if req is None:
        return await replay_body(body, receive)
    dctx = _OneExchange(
        transport=TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers),
        request_id=req.id,
        message_metadata=ServerMessageMetadata(request_context=request),
    )
    # Born ready at the header's version, as the SDK's stateless transport makes its connection.
    connection = Connection.from_envelope(version, None, None)
    message: JSONRPCResponse | JSONRPCError
    try:
        result = await serve_one(server, dctx, req.method, req.params, connection=connection,
                                 lifespan_state=LIFESPAN_STATE)  # fmt: skip
        message = JSONRPCResponse(jsonrpc="2.0", id=req.id, result=result)
    except Exception as exc:
        # The SDK's mapping (MCPError, invalid params); anything else is a generic internal
        # error, logged by the SDK, never the exception's text on the wire.
        message = JSONRPCError(jsonrpc="2.0", id=req.id, error=modern_error_data(exc))
    # As the transport answers in JSON-response mode: 200 whatever the JSON-RPC outcome.
    await Response(message.model_dump_json(by_alias=True, exclude_unset=True), status_code=200,
                   media_type="application/json")(scope, receive, send)  # fmt: skip
    return None
