"""Integration fixtures shared by the gateway tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.gateway.embedded import EmbeddedGateway
from shared.settings import Settings
from tests.conftest import make_settings
from tests.support import openai_server as oai
from tests.support.cluster import NatsCluster
from tests.support.nats_server import NatsServer


@pytest.fixture
async def gw(settings: Settings) -> AsyncIterator[EmbeddedGateway]:
    """The gateway in-process on a free port, rate limit out of the way (a test module that needs
    other settings defines its own `gw`)."""
    gateway = await EmbeddedGateway(settings.model_copy(update={"rate_limit_per_min": 100_000})).start()
    yield gateway
    await gateway.stop()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """A 3-node NATS cluster of the test's own (processes it may kill and restart)."""
    started = await NatsCluster(root=tmp_path / "cluster").start()
    yield started
    started.cleanup()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """The test's settings with the tools database on SQLite, then on PostgreSQL."""
    if request.param == "postgres":
        return settings.model_copy(update={"tools_db_url": request.getfixturevalue("pg_url")})
    return settings


def scripted_settings(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer, **overrides: object) -> Settings:
    """Settings whose built-in model is the scripted server `srv`, one attempt per call."""
    return make_settings(nats_server.url, tmp_path / "data", llm_base_url=srv.url, llm_model="m",
                         llm_api_key="k", llm_retry_attempts=1, **overrides)


@pytest.fixture
async def srv() -> AsyncIterator[oai.OpenAIServer]:
    """The scripted OpenAI-protocol server on the test's loop."""
    async with oai.OpenAIServer() as server:
        yield server


@pytest.fixture
def scripted(nats_server: NatsServer, tmp_path: Path, srv: oai.OpenAIServer) -> Settings:
    """The test's settings with the scripted server as the built-in model (SQLite gateway)."""
    return scripted_settings(nats_server, tmp_path, srv)
