"""Calling a tools_go_equiv tool from the gateway, over NATS, as the verified principal (its admin
flag in the call's metadata, so the tool applies the ownership rule); a tool error becomes
problem+json. The gateway reaches knowledge bases, memory and reports only this way: it never
touches those tables."""

from __future__ import annotations

import weakref
from typing import Any

from services.gateway.access.principal import Principal
from services.gateway.problems import ApiProblem
from shared.bus import Bus
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolMeta

# Tool error code → HTTP status. Anything unknown is the tool service's fault: 502, never 500.
STATUS_OF = {
    "not_found": 404,
    "forbidden": 403,
    "conflict": 409,
    "bad_arguments": 422,
    "bad_document": 422,
    "too_large": 413,
    "unsupported_media_type": 415,
    "unsupported_language": 422,
    "unavailable": 503,
    "timeout": 504,
    "unknown_tool": 503,
}
_clients: weakref.WeakKeyDictionary[Bus, ToolClient] = weakref.WeakKeyDictionary()


async def call_go_tool(
    bus: Bus,
    user: Principal,
    tool: str,
    args: dict[str, Any],
    timeout_s: float = 30.0,
    *,
    for_user: str | None = None,
) -> Any:
    """Call a tools_go_equiv tool as the verified principal (its admin flag included); a tool
    error becomes problem+json. `for_user` makes an admin act on that user's own data (memory);
    it is ignored for anyone else."""
    client = _clients.get(bus)
    if client is None:
        client = _clients[bus] = ToolClient(bus, services=("go",))
    subject = for_user if for_user and user.is_admin else user.id
    meta = ToolMeta(user_id=user.id, admin=user.is_admin)
    reply = await client.call(tool, {**args, "user_id": subject}, meta, timeout_s=timeout_s)
    if reply.ok:
        return reply.result
    code = reply.error.code if reply.error else "error"
    message = reply.error.message if reply.error else "the tool failed"
    status = STATUS_OF.get(code, 502)
    title = {
        403: "Forbidden",
        404: "Not Found",
        409: "Conflict",
        413: "Content Too Large",
        415: "Unsupported Media Type",
        422: "Invalid request",
        503: "Service Unavailable",
        504: "Gateway Timeout",
    }.get(status, "Bad Gateway")
    raise ApiProblem(status, title, message, type_=code.replace("_", "-"))
