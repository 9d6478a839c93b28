"""OAuth 2.0 protected-resource metadata for `/mcp` (RFC 9728, as the MCP authorization spec asks):
`GET /.well-known/oauth-protected-resource` (and its `/mcp`-suffixed form) tells a client which
resource it is talking to, how to present a token, and which authorization servers issue tokens
for it (`AGENTIX_MCP_AUTHORIZATION_SERVERS`; without one, tokens come from `POST /api/v1/auth/token`
and API keys, sent as `Authorization: Bearer`). A 401 from `/mcp` points at it in its
`WWW-Authenticate` header."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Scope

from services.gateway.middleware.common import header

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def base_url(scope: Scope) -> str:
    """The gateway's URL as the client reached it (its Host; `X-Forwarded-Proto` behind a proxy)."""
    scheme = header(scope, b"x-forwarded-proto") or scope.get("scheme", "http")
    host = header(scope, b"host")
    if host is None:
        server = scope.get("server") or ("localhost", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scheme}://{host}"


def challenge(scope: Scope) -> str:
    """The `WWW-Authenticate` value of a 401 from `/mcp`."""
    return f'Bearer resource_metadata="{base_url(scope)}{WELL_KNOWN}/mcp"'


async def metadata(request: Request) -> JSONResponse:
    settings = request.app.state.settings
    body: dict[str, Any] = {
        "resource": f"{base_url(request.scope)}/mcp",
        "resource_name": "Agentix",
        "bearer_methods_supported": ["header"],
        "scopes_supported": [],
        "resource_documentation": "docs/API.md#mcp",
    }
    if settings.mcp_authorization_servers:
        body["authorization_servers"] = list(settings.mcp_authorization_servers)
    return JSONResponse(body, headers={"Cache-Control": "public, max-age=3600"})


def discovery_routes() -> list[Route]:
    return [
        Route(WELL_KNOWN, metadata, methods=["GET"], include_in_schema=False),
        Route(f"{WELL_KNOWN}/mcp", metadata, methods=["GET"], include_in_schema=False),
    ]
