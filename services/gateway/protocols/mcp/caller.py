"""Who is asking, in an MCP handler: the principal the endpoint verified (left in the request's
state), and what the audit row of the POST names."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from services.gateway.access.principal import Principal

RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for resources/read of an unknown URI


def principal(ctx: ServerRequestContext[Any, Any]) -> Principal:
    found = getattr(ctx.request.state, "principal", None) if ctx.request is not None else None
    if not isinstance(found, Principal):
        raise MCPError(types.INVALID_REQUEST, "A valid bearer token is required.")
    return found


def audit(ctx: ServerRequestContext[Any, Any], target: str, read_only: bool = False) -> None:
    """What the audit row of this POST names as its target (the audit middleware writes it), and
    whether the request changed nothing (then the response does not wait for the row's commit)."""
    if ctx.request is not None:
        ctx.request.state.audit_target = target[:300]
        ctx.request.state.read_only = read_only
