"""`resources/subscribe` and `resources/unsubscribe`: a subscription belongs to the session the
request names (`Mcp-Session-Id`), stored in the session's record (`sessions.py`), so whichever
replica holds the session's GET stream filters `notifications/resources/updated` by it."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from services.gateway.protocols.mcp import caller
from services.gateway.protocols.mcp.sessions import MAX_SUBSCRIPTIONS, McpSessions

# What can be subscribed to: the URIs `resources/read` serves (see resources.py). Only a
# workflow's resource changes after it is made, so only those send updates for now.
SUBSCRIBABLE = ("agentix://workflows/", "agentix://kb/", "agentix://conversations/", "agentix://reports/")


class McpSubscriptions:
    def __init__(self, store: Any) -> None:
        self._store = store  # () -> McpSessions | None: the gateway's bus may reconnect

    async def _change(self, ctx: ServerRequestContext[Any, Any], uri: str, on: bool) -> types.EmptyResult:
        caller.principal(ctx)
        session_id = getattr(ctx.request.state, "mcp_session", None) if ctx.request is not None else None
        if not isinstance(session_id, str):
            raise MCPError(types.INVALID_REQUEST, "Subscriptions belong to a session: send the Mcp-Session-Id "
                           "that initialize answered with.")  # fmt: skip
        if not uri.startswith(SUBSCRIBABLE):
            raise MCPError(types.INVALID_PARAMS, f"Not an Agentix resource: {uri[:200]}")
        store: McpSessions | None = self._store()
        if store is None:
            raise MCPError(types.INTERNAL_ERROR, "The message bus is not connected; try again shortly.")
        if not await store.subscribe(session_id, uri, on):
            raise MCPError(types.INVALID_REQUEST, f"The session has ended or holds {MAX_SUBSCRIPTIONS} subscriptions.")
        return types.EmptyResult()

    async def subscribe(self, ctx: ServerRequestContext[Any, Any],
                        params: types.SubscribeRequestParams) -> types.EmptyResult:  # fmt: skip
        return await self._change(ctx, str(params.uri), True)

    async def unsubscribe(self, ctx: ServerRequestContext[Any, Any],
                          params: types.UnsubscribeRequestParams) -> types.EmptyResult:  # fmt: skip
        return await self._change(ctx, str(params.uri), False)
