"""The service host every service runs on: health that reports real state (checks merged, a
failing check named, draining said), the stop order (drain, leave the bus, release), and the
dispatcher's health saying whether its worker and consumer are really there."""

from __future__ import annotations

import asyncio
from typing import Any

from nats.errors import NoRespondersError

from shared.bus import Bus
from shared.contract.heartbeat import HealthReply
from shared.service_host import ServiceHost
from shared.settings import Settings
from tests.support.dispatcher import dispatcher


async def ask_health(bus: Bus, service: str) -> HealthReply:
    """The first answer (the tests run one instance)."""
    msg = await bus.nc.request(bus.subjects.health(service), b"", timeout=10)
    return HealthReply.model_validate_json(msg.data)


async def first_heartbeat(bus: Bus, service: str) -> asyncio.Task[Any]:
    """Resolves at the first heartbeat of `service`: from then on its health is answered."""
    sub = await bus.nc.subscribe(bus.subjects.heartbeat(service, "*"))

    async def wait() -> None:
        try:
            await sub.next_msg(timeout=30)
        finally:
            await sub.unsubscribe()

    return asyncio.create_task(wait())


async def serve(bus: Bus, host: ServiceHost) -> None:
    beat = await first_heartbeat(bus, host.service)
    await host.serve()
    await beat


async def test_health_merges_the_checks_and_names_a_failing_one(bus: Bus, settings: Settings) -> None:
    async def storage() -> dict[str, Any]:
        return {"db": {"ok": True}, "cache": {"ok": True, "rows": 3}}

    async def broken() -> dict[str, Any]:
        raise RuntimeError("probe exploded")

    async with ServiceHost(settings, "svc-a") as host:
        host.checks("storage", storage)
        await serve(bus, host)
        reply = await ask_health(bus, "svc-a")
        assert reply.ok and reply.instance == host.instance
        assert reply.checks == {
            "nats": {"ok": True},
            "db": {"ok": True},
            "cache": {"ok": True, "rows": 3},
            "lifecycle": {"ok": True, "state": "serving"},
        }
        host.checks("broken", broken)
        reply = await ask_health(bus, "svc-a")
        assert not reply.ok
        assert reply.checks["broken"] == {"ok": False, "error": "RuntimeError: probe exploded"}


async def test_stop_drains_then_leaves_the_bus_then_releases(bus: Bus, settings: Settings) -> None:
    order: list[str] = []
    drain_entered, finish_drain = asyncio.Event(), asyncio.Event()

    async def drain_work() -> None:
        drain_entered.set()
        await finish_drain.wait()
        order.append("drain work")

    def failing_release() -> None:
        order.append("failing release")
        raise OSError("already gone")

    host = ServiceHost(settings, "svc-b")
    await host.start()
    host.on_release("first resource", lambda: order.append("release first"))
    host.on_release("second resource", failing_release)
    host.on_drain("older work", lambda: order.append("drain older work"))
    host.on_drain("work", drain_work)
    await serve(bus, host)
    stopping = asyncio.create_task(host.stop())
    await drain_entered.wait()
    # Still on the bus while in-flight work finishes, and saying so.
    reply = await ask_health(bus, "svc-b")
    assert reply.ok and reply.checks["lifecycle"] == {"ok": True, "state": "draining"}
    finish_drain.set()
    await stopping
    # Newest first in each phase; a failing step does not stop the ones after it.
    assert order == ["drain work", "drain older work", "failing release", "release first"]
    assert not host.bus.connected
    try:
        await bus.nc.request(bus.subjects.health("svc-b"), b"", timeout=2)
    except NoRespondersError:
        pass
    else:
        raise AssertionError("a stopped instance still answers health")


async def test_a_setup_error_still_closes_the_connection(settings: Settings) -> None:
    host = ServiceHost(settings, "svc-c")
    try:
        async with host:
            host.on_release("resource", lambda: None)
            raise ValueError("setup failed")
    except ValueError:
        pass
    assert not host.bus.connected


async def test_dispatcher_health_reports_its_worker_and_consumer(bus: Bus, settings: Settings) -> None:
    beat = await first_heartbeat(bus, "dispatcher")
    async with dispatcher(settings):
        await beat
        reply = await ask_health(bus, "dispatcher")
    checks = reply.checks
    assert reply.ok, checks
    assert checks["worker"]["ok"] and checks["worker"]["pulling"] and checks["worker"]["inflight"] == 0
    assert checks["consumer"]["ok"] and checks["consumer"]["pending"] == 0
    assert checks["lifecycle"] == {"ok": True, "state": "serving"}
    assert checks["nats"] == {"ok": True}
