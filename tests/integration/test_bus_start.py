"""A service's start on the bus against real servers: the first connection waits for a NATS that
does not answer yet (a command's fails fast, saying why), a stop while it waits ends the start
at once, declarations wait for a cluster to have peers enough for their replicas, and a config
the server refuses is a clear error at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.bus import Bus, BusUnavailable
from shared.bus.retry import BusDeclareError
from shared.natsd import free_port
from shared.service_host import ServiceHost
from shared.settings import Settings
from shared.startup import StoppedWhileStarting
from tests.conftest import drop_deployment, make_settings
from tests.support.cluster import NatsCluster
from tests.support.forming import js_enabled
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually


def nowhere(tmp_path: Path, **overrides: object) -> tuple[Settings, int]:
    """Settings for a NATS that is not running (yet) on a free port: attempts of 1 s."""
    port = free_port()
    return make_settings(f"nats://127.0.0.1:{port}", tmp_path / "data", nats_connect_timeout_s=1.0,
                         **overrides), port


async def test_a_command_fails_fast_saying_where_nats_was_not_found(tmp_path: Path) -> None:
    settings, port = nowhere(tmp_path)
    with pytest.raises(BusUnavailable) as caught:
        await Bus.connect(settings, name="agentix-cli")
    message = str(caught.value)
    assert message.startswith(f"NATS not reachable at nats://127.0.0.1:{port} within 1 s: ")
    assert "Connect call failed" in message, message  # the refusal itself, not only "timeout"


async def test_a_service_waits_for_nats_and_says_so_at_each_attempt(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings, port = nowhere(tmp_path)
    host = ServiceHost(settings, "svc-early")
    heard: list[str] = []
    with caplog.at_level(logging.WARNING, logger="agentix.bus.retry"):
        starting = asyncio.create_task(host.start())

        async def waited_twice() -> bool:
            heard[:] = [r.getMessage() for r in caplog.records if r.name == "agentix.bus.retry"]
            return len(heard) >= 2

        await eventually(waited_twice, attempts=600, every_s=0.05)
        assert host.startup.phase == "connecting" and not starting.done()
        assert host.startup.describe().startswith(f"waiting for NATS: NATS not reachable at nats://127.0.0.1:{port}")
        assert all(line.startswith("waiting for NATS: ") and "attempt" in line for line in heard), heard
        server = NatsServer(port=port).start()
    try:
        bus = await asyncio.wait_for(starting, 60)
        assert bus.connected and host.startup.phase == "wiring"
        await host.serve()
        assert host.startup.check() == {"ok": True, "state": "serving"}
        await drop_deployment(bus)
        await host.stop()
    finally:
        server.cleanup()


async def test_a_stop_while_waiting_for_nats_ends_the_start_at_once(tmp_path: Path) -> None:
    settings, _ = nowhere(tmp_path)
    stop = asyncio.Event()
    host = ServiceHost(settings, "svc-stopped", stop=stop)
    starting = asyncio.create_task(host.start())

    async def waiting() -> bool:
        return host.startup.waiting_for is not None

    await eventually(waiting, attempts=600, every_s=0.05)
    stop.set()
    with pytest.raises(StoppedWhileStarting, match="svc-stopped was stopped while waiting for NATS"):
        await asyncio.wait_for(starting, 10)


async def test_a_config_the_server_refuses_is_a_clear_error_naming_the_stream(nats_server: NatsServer,
                                                                               tmp_path: Path) -> None:
    settings = make_settings(nats_server.url, tmp_path / "data", js_replicas=3)  # one server, no cluster
    bus = await Bus.connect(settings, name="refused")
    try:
        with pytest.raises(BusDeclareError) as caught:
            await bus.declare()
        assert str(caught.value) == (f"declaring stream {bus.names.tasks_stream} (replicas 3): refused by the "
                                     "server: replicas > 1 not supported in non-clustered mode (err 10074)")
    finally:
        await bus.close()


@pytest.fixture
async def two_of_three(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """A 3-node cluster with only two nodes started (JetStream-enabled): a meta group, but too
    few peers for a stream of 3 replicas."""
    cluster = NatsCluster(root=tmp_path / "cluster")
    try:
        for node in cluster.nodes[:2]:
            node.start()
        await asyncio.gather(*(js_enabled(node) for node in cluster.nodes[:2]))
        yield cluster
    finally:
        cluster.cleanup()


@pytest.mark.chaos
async def test_declarations_wait_until_the_cluster_has_peers_for_their_replicas(
        two_of_three: NatsCluster, tmp_path: Path) -> None:
    urls = two_of_three.urls
    settings = make_settings(urls[0], tmp_path / "data", js_replicas=3).model_copy(update={"nats_servers": urls[:2]})
    bus = await Bus.connect(settings, name="placement")
    heard: list[str] = []
    try:
        declaring = asyncio.create_task(bus.declare(on_wait=heard.append))

        async def refused_placement() -> bool:
            return any("no suitable peers for placement (err 10005)" in reason for reason in heard)

        await eventually(refused_placement, attempts=1200, every_s=0.05)
        assert not declaring.done()
        two_of_three.nodes[2].start()  # the third peer joins: the stream can be placed
        await asyncio.wait_for(declaring, 120)
        info = await bus.js.stream_info(bus.names.tasks_stream)
        assert info.config.num_replicas == 3
        await drop_deployment(bus)
    finally:
        await bus.close()
