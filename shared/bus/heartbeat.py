"""Heartbeats every few seconds, and health answers from every instance."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.aio import cancel_and_wait
from shared.bus.client import Bus, encode
from shared.contract.base import utcnow
from shared.contract.heartbeat import HealthReply, Heartbeat, Load
from shared.settings import VERSION

log = logging.getLogger("agentix.bus.heartbeat")


def new_instance_id(service: str) -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Heartbeater:
    def __init__(
        self,
        bus: Bus,
        service: str,
        instance: str | None = None,
        load: Callable[[], Load] | None = None,
        detail: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.bus = bus
        self.service = service
        self.instance = instance or new_instance_id(service)
        self.started_at = utcnow()
        self._load = load or Load
        self._detail = detail or dict
        self._task: asyncio.Task[None] | None = None

    def beat(self) -> Heartbeat:
        return Heartbeat(
            service=self.service,
            instance=self.instance,
            version=VERSION,
            started_at=self.started_at,
            interval_s=self.bus.settings.heartbeat_interval_s,
            load=self._load(),
            detail=self._detail(),
        )

    async def _run(self) -> None:
        subject = self.bus.subjects.heartbeat(self.service, self.instance)
        while True:
            try:
                await self.bus.publish(subject, self.beat())
            except Exception as exc:  # disconnected: keep beating once we are back
                log.debug("heartbeat not sent: %s", exc)
            await asyncio.sleep(self.bus.settings.heartbeat_interval_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"heartbeat-{self.service}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)


Checks = Callable[[], Awaitable[dict[str, Any]]]


async def serve_health(bus: Bus, service: str, instance: str, checks: Checks) -> Subscription:
    """Every instance answers `P.health.<service>` (no queue group: the caller gathers all)."""

    async def answer(msg: Msg) -> None:
        try:
            result = await checks()
            ok = all(bool(v.get("ok", v) if isinstance(v, dict) else v) for v in result.values())
        except Exception as exc:
            result, ok = {"error": f"{type(exc).__name__}: {exc}"}, False
        with contextlib.suppress(Exception):
            await msg.respond(encode(HealthReply(service=service, instance=instance, ok=ok, checks=result)))

    return await bus.nc.subscribe(bus.subjects.health(service), cb=answer)


async def gather_health(bus: Bus, service: str, window_s: float = 0.3) -> list[HealthReply]:
    """Ask every instance of a service and collect the answers that arrive within the window."""
    inbox = bus.nc.new_inbox()
    replies: list[HealthReply] = []
    sub = await bus.nc.subscribe(inbox)
    try:
        await bus.nc.publish(bus.subjects.health(service), b"", reply=inbox)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + window_s
        while (left := deadline - loop.time()) > 0:
            try:
                msg = await sub.next_msg(timeout=left)
            except Exception:
                break
            with contextlib.suppress(Exception):
                replies.append(HealthReply.model_validate_json(msg.data))
    finally:
        await sub.unsubscribe()
    return replies
