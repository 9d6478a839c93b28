"""A revoked API key refused at once on every gateway replica: the revoking gateway broadcasts
`{key_id}` on `P.control.keys.revoked` (core NATS) with a reply inbox; every gateway drops the key
from its verification cache and answers with its instance id. The revocation waits for the
answer of every gateway instance it knows from their heartbeats (at most `CONFIRM_WAIT_S`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from nats.aio.msg import Msg

from services.gateway.access.key_auth import KeyVerifier
from services.gateway.fleet.instances import InstanceRegistry
from shared.bus import Bus

log = logging.getLogger("agentix.gateway.keys")
TOPIC = "keys.revoked"
CONFIRM_WAIT_S = 2.0


class KeyRevocations:
    def __init__(self, bus: Bus, verifier: KeyVerifier, instances: InstanceRegistry, instance: str) -> None:
        self.bus = bus
        self.verifier = verifier
        self.instances = instances
        self.instance = instance
        self._sub: Any = None

    @property
    def subject(self) -> str:
        return self.bus.subjects.control(TOPIC)

    async def start(self) -> None:
        self._sub = await self.bus.nc.subscribe(self.subject, cb=self._on_revoked)
        # While NATS was away a revocation may have gone by: forget every key kept.
        self.bus.on_reconnect(self._forget_all)

    async def _forget_all(self) -> None:
        self.verifier.clear()

    async def stop(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _on_revoked(self, msg: Msg) -> None:
        try:
            key_id = str(json.loads(msg.data)["key_id"])
        except (ValueError, KeyError, TypeError):
            log.debug("ignoring a malformed key revocation")
            return
        self.verifier.drop(key_id)
        if msg.reply:
            with contextlib.suppress(Exception):
                await msg.respond(json.dumps({"instance": self.instance}).encode())

    async def broadcast(self, key_id: str) -> list[str]:
        """Every gateway drops the key; returns the instances that confirmed it (this one first)."""
        self.verifier.drop(key_id)
        expected = {s.beat.instance for s in self.instances.live("gateway")} | {self.instance}
        confirmed: list[str] = []
        inbox = self.bus.nc.new_inbox()
        sub = await self.bus.nc.subscribe(inbox)
        try:
            await self.bus.nc.publish(self.subject, json.dumps({"key_id": key_id}).encode(), reply=inbox)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CONFIRM_WAIT_S
            while not expected.issubset(confirmed) and (left := deadline - loop.time()) > 0:
                try:
                    reply = await sub.next_msg(timeout=left)
                except Exception:
                    break
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    confirmed.append(str(json.loads(reply.data)["instance"]))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        missing = expected.difference(confirmed)
        if missing:
            log.warning("key %s revoked; %d gateway(s) did not confirm within %.0f s (their cache ends within %.0f s)",
                        key_id, len(missing), CONFIRM_WAIT_S, self.verifier.ttl_s)
        return sorted(set(confirmed), key=lambda i: i != self.instance)
