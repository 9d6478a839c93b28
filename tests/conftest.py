"""Shared fixtures: a private nats-server for the run, per-test settings with a unique subject
prefix (so tests never see each other's streams), throwaway PostgreSQL/Redis when configured."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from shared.bus import Bus
from shared.settings import Settings
from tests.support.nats_server import NatsServer

# No test reaches a real model: HTTP to any host but loopback is refused and fails the test.
pytest_plugins = ("tests.support.model_guard",)

PG_ENV = "AGENTIX_TEST_POSTGRES_URL"
REDIS_ENV = "AGENTIX_TEST_REDIS_URL"


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    server = NatsServer().start()
    yield server
    server.cleanup()


def make_settings(nats_url: str, data_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "nats_servers": [nats_url],
        "subject_prefix": f"t{uuid.uuid4().hex[:10]}",
        "data_dir": data_dir,
        "heartbeat_interval_s": 0.5,
        "task_ack_wait_s": 5.0,
        "llm_base_url": None,
        "llm_api_key": None,
        "llm_model": None,
        "redis_url": None,
        "gateway_db_url": None,
        "tools_db_url": None,
        "otlp_endpoint": None,
        # JetStream reserves max_bytes per stream: keep test streams small so a whole run fits.
        "events_max_bytes": 64 * 1024 * 1024,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def settings(nats_server: NatsServer, tmp_path: Path) -> Settings:
    return make_settings(nats_server.url, tmp_path / "data")


@pytest.fixture
async def bus(settings: Settings) -> AsyncIterator[Bus]:
    connected = await Bus.connect(settings, name="test")
    await connected.declare()
    yield connected
    await drop_deployment(connected)
    await connected.close()


async def drop_deployment(bus: Bus) -> None:
    """Delete the test's streams and buckets so a long run does not fill the JetStream store."""
    names = bus.names
    streams = [names.tasks_stream, names.events_stream, names.ingest_stream, names.dead_stream, names.schedules_stream,
               f"KV_{names.control_bucket}", f"KV_{names.checkpoints_bucket}",
               f"OBJ_{names.reports_bucket}", f"OBJ_{names.uploads_bucket}"]
    for stream in streams:
        try:
            await bus.js.delete_stream(stream)
        except Exception:  # already gone, or the test killed the server
            pass


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A throwaway PostgreSQL database for this run (`postgresql+psycopg://…`), or skip."""
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} not set")
    import psycopg

    name = f"agentix_test_{uuid.uuid4().hex[:8]}"
    plain = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    root = plain.rsplit("/", 1)[0]
    yield f"postgresql+psycopg://{root.split('://', 1)[1]}/{name}"
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_pg(pg_url: str) -> Iterator[str]:
    """A PostgreSQL database of this test alone (the session's `pg_url` keeps what earlier tests
    wrote, such as a model chain that would reach every later gateway)."""
    import psycopg

    name = f"agentix_one_{uuid.uuid4().hex[:8]}"
    admin_url = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{pg_url.rsplit('/', 1)[0]}/{name}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get(REDIS_ENV)
    if not url:
        pytest.skip(f"{REDIS_ENV} not set")
    return url


@pytest.fixture
def redis_prefix() -> str:
    return f"agentix-test:{uuid.uuid4().hex[:8]}:"
