"""Who may reach `/mcp` from where: the `Origin` and `Host` checks the MCP transport spec asks of
every Streamable HTTP server against DNS rebinding (a page on a foreign site that resolves to the
gateway's address must not be served). A foreign one is a 403 before anything else happens.

- `Origin`, when present, must be a local one (`http(s)://localhost|127.0.0.1|[::1]` on any port),
  one of `AGENTIX_MCP_ALLOWED_ORIGINS`, or one of the API's `AGENTIX_CORS_ORIGINS`. Clients that
  are not browsers send none and pass.
- `Host` must be a local one or one of `AGENTIX_MCP_ALLOWED_HOSTS` (`name`, `name:port` or
  `name:*`); `*` in that list turns the Host check off (behind a proxy that rewrites it)."""

from __future__ import annotations

from urllib.parse import urlsplit

from shared.settings import GatewaySettings

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
ANY = "*"


def _hostname(host: str) -> str:
    """`name` of `name:port` (an IPv6 literal keeps its brackets)."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(settings: GatewaySettings, host: str | None) -> bool:
    allowed = settings.mcp_allowed_hosts
    if ANY in allowed:
        return True
    if not host:
        return False
    host = host.strip().lower()
    name = _hostname(host)
    if name in LOCAL_HOSTS or host in allowed or name in allowed:
        return True
    return any(a.endswith(":*") and name == a[:-2] for a in allowed)


def origin_allowed(settings: GatewaySettings, origin: str | None) -> bool:
    if origin is None:
        return True  # not a browser
    origin = origin.strip().rstrip("/").lower()
    if origin in {o.rstrip("/").lower() for o in (*settings.mcp_allowed_origins, *settings.cors_origins)}:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.hostname is not None and (
        parts.hostname in LOCAL_HOSTS or f"[{parts.hostname}]" in LOCAL_HOSTS
    )


def refusal(settings: GatewaySettings, host: str | None, origin: str | None) -> str | None:
    """Why the request may not be served (the 403's detail), or None."""
    if not origin_allowed(settings, origin):
        return f"Origin {origin!r} is not allowed to reach /mcp (AGENTIX_MCP_ALLOWED_ORIGINS)."
    if not host_allowed(settings, host):
        return f"Host {host!r} is not allowed for /mcp (AGENTIX_MCP_ALLOWED_HOSTS)."
    return None
