"""Where a completion callback may go (SSRF): an http(s) URL whose host is on the allow-list
(when one is configured) and whose every address is public — loopback, private, link-local
(cloud metadata), multicast and reserved addresses are refused unless private targets are
allowed. The host is resolved here, so a name pointing at an internal address is refused too."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from urllib.parse import urlsplit

from shared.errors import AgentixError


class TargetRefused(AgentixError):
    """A callback target refused (scheme, allow-list or a private address), with why."""

    code = "callback_target"
    http_status = 422

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def _host_allowed(host: str, allow_hosts: Sequence[str]) -> bool:
    """`example.com` allows that host; `.example.com` allows its subdomains too."""
    for entry in allow_hosts:
        entry = entry.lower()
        if host == entry or (entry.startswith(".") and (host.endswith(entry) or host == entry[1:])):
            return True
    return False


async def check_target(url: str, allow_hosts: Sequence[str] = (), allow_private: bool = False) -> list[str]:
    """The addresses the URL's host resolves to, when the callback may go there."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise TargetRefused(f"webhook URL scheme must be http or https, not {parts.scheme or 'none'!r}")
    host = (parts.hostname or "").lower()
    if not host:
        raise TargetRefused("webhook URL has no host")
    if parts.username or parts.password:
        raise TargetRefused("webhook URL must not carry credentials")
    if allow_hosts and not _host_allowed(host, allow_hosts):
        raise TargetRefused(f"webhook host {host!r} is not on the allow-list")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, parts.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise TargetRefused(f"webhook host {host!r} does not resolve: {exc}") from None
    addresses = sorted({str(info[4][0]) for info in infos})
    if not allow_private:
        internal = [a for a in addresses if not _public(a)]
        if internal:
            raise TargetRefused(f"webhook host {host!r} resolves to a private or loopback address ({internal[0]}); "
                                "allow private targets in the configuration to use it")  # fmt: skip
    return addresses
