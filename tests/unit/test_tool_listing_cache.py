"""The tool listing cache the dispatcher and the gateway's MCP catalog share: a complete listing
answers for `ttl_s`, one without a tool service only for `incomplete_ttl_s` (so a restarted
service's tools come back within a second, not a whole TTL), and concurrent askers share one
round of `list_tools`."""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

from shared.bus.tools import CachedListing, ToolClient, ToolListing
from shared.contract.tools import ToolDescriptor


def tool(name: str, service: Literal["go", "py"]) -> ToolDescriptor:
    return ToolDescriptor(name=name, title=name, description=name, service=service, input_schema={"type": "object"})


GO_ONLY = ToolListing([tool("kb_search", "go")], missing=("py",))
BOTH = ToolListing([tool("kb_search", "go"), tool("doc_parse", "py")])


class Services:
    """What `ToolClient.listing()` answers, round by round; the rounds asked are counted."""

    def __init__(self, *answers: ToolListing) -> None:
        self.answers = list(answers)
        self.asked = 0
        self.gate: asyncio.Event | None = None

    async def listing(self) -> ToolListing:
        self.asked += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.answers[min(self.asked, len(self.answers)) - 1]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def cache(services: Services, clock: Clock) -> CachedListing:
    return CachedListing(cast(ToolClient, services), ttl_s=5.0, incomplete_ttl_s=1.0, clock=clock)


async def test_a_listing_without_a_service_is_asked_for_again_after_a_second() -> None:
    services, clock = Services(GO_ONLY, BOTH), Clock()
    listing = cache(services, clock)
    assert (await listing.get()).missing == ("py",)
    clock.now += 0.9
    assert (await listing.get()) is GO_ONLY and services.asked == 1
    clock.now += 0.2  # past the incomplete listing's second, well inside the full TTL
    assert (await listing.get()) is BOTH and services.asked == 2


async def test_a_complete_listing_answers_for_the_whole_ttl() -> None:
    services, clock = Services(BOTH, GO_ONLY), Clock()
    listing = cache(services, clock)
    await listing.get()
    clock.now += 4.9
    assert (await listing.get()) is BOTH and services.asked == 1
    clock.now += 0.2
    assert (await listing.get()) is GO_ONLY and services.asked == 2
    assert (await listing.get(refresh=True)) is GO_ONLY and services.asked == 3  # a refresh always asks


async def test_concurrent_askers_share_one_round() -> None:
    services, clock = Services(BOTH), Clock()
    services.gate = asyncio.Event()
    listing = cache(services, clock)
    waiting: list[Any] = [asyncio.create_task(listing.get(refresh=n % 2 == 0)) for n in range(6)]
    await asyncio.sleep(0)  # every asker is waiting on the one round in flight
    services.gate.set()
    assert all(got is BOTH for got in await asyncio.gather(*waiting))
    assert services.asked == 1
    assert listing.last is BOTH
