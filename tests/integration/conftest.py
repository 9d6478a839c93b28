"""Integration fixtures shared by the gateway tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.gateway.embedded import EmbeddedGateway
from shared.settings import Settings


@pytest.fixture
async def gw(settings: Settings) -> AsyncIterator[EmbeddedGateway]:
    """The gateway in-process on a free port, rate limit out of the way (a test module that needs
    other settings defines its own `gw`)."""
    gateway = await EmbeddedGateway(settings.model_copy(update={"rate_limit_per_min": 100_000})).start()
    yield gateway
    await gateway.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """The test's settings with the tools database on SQLite, then on PostgreSQL."""
    if request.param == "postgres":
        return settings.model_copy(update={"tools_db_url": request.getfixturevalue("pg_url")})
    return settings
