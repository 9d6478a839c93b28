"""Callback targets (SSRF): internal addresses refused unless allowed, the allow-list enforced."""

from __future__ import annotations

import pytest

from services.gateway.triggers.targets import TargetRefused, check_target


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/cb",
        "http://localhost/cb",
        "http://10.1.2.3/cb",
        "http://192.168.0.5/cb",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/cb",
        "http://[::ffff:127.0.0.1]/cb",
        "http://0.0.0.0/cb",
        "http://224.0.0.1/cb",
    ],
)
async def test_internal_addresses_are_refused_unless_allowed(url: str) -> None:
    with pytest.raises(TargetRefused, match="private or loopback"):
        await check_target(url)
    assert await check_target(url, allow_private=True)


async def test_public_address_passes_and_allow_list_is_enforced() -> None:
    assert await check_target("https://93.184.215.14/hook") == ["93.184.215.14"]
    with pytest.raises(TargetRefused, match="allow-list"):
        await check_target("https://93.184.215.14/hook", allow_hosts=["hooks.example.com"])
    assert await check_target("http://localhost:9/x", allow_hosts=[".localhost"], allow_private=True)


@pytest.mark.parametrize(
    ("url", "reason"),
    [("ftp://example.com/x", "scheme"), ("http:///x", "no host"), ("http://u:p@93.184.215.14/", "credentials")],
)
async def test_malformed_urls_say_why(url: str, reason: str) -> None:
    with pytest.raises(TargetRefused, match=reason):
        await check_target(url)
