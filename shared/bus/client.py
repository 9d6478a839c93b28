"""The NATS connection every service uses: reconnect forever, a short ping, a bounded first
connect (a command fails fast) or, for a service, a first connect that waits for NATS, JSON
contract codec, and trace headers on everything sent."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import PubAck
from nats.js.object_store import ObjectStore
from pydantic import BaseModel

from shared.bus.names import Names, Subjects, names_for, subjects_for
from shared.bus.retry import ACK_TIMEOUT_S, FIRST_CONNECTION, RETRY_FOR_S, Waiting, with_retries
from shared.bus.streams import declare_all
from shared.bus.tracing import inject_headers
from shared.errors import AgentixError
from shared.settings import CommonSettings

log = logging.getLogger("agentix.bus")
M = TypeVar("M", bound=BaseModel)
Callback = Callable[[], Awaitable[None]]


class BusUnavailable(AgentixError, ConnectionError):
    """NATS could not be reached within the connect timeout. Still a `ConnectionError`, which
    is what callers that retry a connection catch (`Bus.connect_waiting` among them)."""

    code = "bus_unavailable"
    http_status = 503
    retryable = True


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json(exclude_none=True, by_alias=True).encode()


class Bus:
    """A connected NATS client with JetStream, the deployment's names, and typed helpers."""

    def __init__(self, nc: Client, settings: CommonSettings, name: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.settings = settings
        self.name = name
        self.subjects: Subjects = subjects_for(settings)
        self.names: Names = names_for(settings)
        self.reconnects = 0
        self.closing = False
        self._object_stores: dict[str, ObjectStore] = {}
        self._on_reconnect: list[Callback] = []

    @classmethod
    async def connect(cls, settings: CommonSettings, name: str) -> Bus:
        """One attempt, bounded by `nats_connect_timeout_s` (nats-py tries each server in turn
        meanwhile): `BusUnavailable`, with the last refusal, when no server answered. What a
        command uses, to fail fast; a service waits (`connect_waiting`)."""
        holder: dict[str, Bus] = {}
        refused: list[BaseException] = []  # why the servers refused before the first connection

        async def error_cb(exc: Exception) -> None:
            if "bus" not in holder:  # still connecting: said once, in BusUnavailable
                refused[:] = [exc]
                return
            log.warning("nats error (%s): %s", name, exc)

        async def disconnected_cb() -> None:
            bus = holder.get("bus")
            if bus is not None and bus.closing:
                return
            log.warning("nats disconnected (%s)", name)

        async def reconnected_cb() -> None:
            bus = holder.get("bus")
            if bus is None:
                return
            bus.reconnects += 1
            log.info("nats reconnected (%s)", name)
            for cb in list(bus._on_reconnect):
                try:
                    await cb()
                except Exception:
                    log.exception("reconnect callback failed")

        try:
            # max_reconnect_attempts=-1 makes connect() retry forever, so bound the first one.
            nc = await asyncio.wait_for(
                nats.connect(
                    servers=settings.nats_servers,
                    name=name,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                    # A half-open link (a server that vanished without closing its sockets: a
                    # frozen process, a machine or a container gone) is noticed at the third ping
                    # with two unanswered, 4-6 s — within a JetStream election (4-9 s), so the
                    # client is on a live node by the time a new leader takes its writes. At 5 s
                    # it was 10-15 s, which held a task on the dead node past the election.
                    ping_interval=2,
                    max_outstanding_pings=2,
                    allow_reconnect=True,
                    error_cb=error_cb,
                    disconnected_cb=disconnected_cb,
                    reconnected_cb=reconnected_cb,
                ),
                timeout=settings.nats_connect_timeout_s,
            )
        except (TimeoutError, OSError, nats.errors.NoServersError) as exc:
            why = refused[0] if refused else exc
            raise BusUnavailable(
                f"NATS not reachable at {','.join(settings.nats_servers)} within "
                f"{settings.nats_connect_timeout_s:g} s: {str(why) or type(why).__name__}"
            ) from exc
        bus = cls(nc, settings, name)
        holder["bus"] = bus
        return bus

    @classmethod
    async def connect_waiting(cls, settings: CommonSettings, name: str, on_wait: Waiting | None = None) -> Bus:
        """Connect, however long NATS takes to answer: a service started before NATS (or before
        any node of its cluster) waits for it rather than exiting, with a log line per attempt
        (`nats_connect_timeout_s` each, then a pause growing from 0.5 s to 5 s)."""
        return await with_retries(lambda: cls.connect(settings, name),
                                  what="waiting for NATS",
                                  policy=FIRST_CONNECTION, on_wait=on_wait)

    def on_reconnect(self, callback: Callback) -> None:
        """Run `callback` after every reconnect (e.g. to re-create a KV watcher)."""
        self._on_reconnect.append(callback)

    @property
    def connected(self) -> bool:
        return self.nc.is_connected

    async def declare(self, on_wait: Waiting | None = None) -> None:
        """Declare every stream, consumer and bucket, waiting through a forming cluster for up to
        `declare_timeout_s` (`streams.py`); `on_wait` hears what each wait is for."""
        await declare_all(self.nc, self.settings, on_wait)

    async def object_store(self, name: str) -> ObjectStore:
        """A handle on one of the declared object stores, looked up once per connection."""
        store = self._object_stores.get(name)
        if store is None:
            store = self._object_stores[name] = await self.js.object_store(name)
        return store

    async def publish(self, subject: str, model: BaseModel, headers: dict[str, str] | None = None) -> None:
        await self.nc.publish(subject, encode(model), headers=inject_headers(headers))

    async def js_publish(
        self, subject: str, model: BaseModel, msg_id: str | None = None, headers: dict[str, str] | None = None,
        retry_for_s: float = RETRY_FOR_S,
    ) -> PubAck:
        """Publish to a stream and wait until it is stored, riding through a leader election or
        a reconnect (`retry.with_retries`, for `retry_for_s`). The message always has a
        `Nats-Msg-Id` (`msg_id`, or a fresh one), kept across retries, so a retry never stores
        it twice."""
        return await self.js_publish_raw(subject, encode(model), msg_id=msg_id, headers=headers,
                                         retry_for_s=retry_for_s)

    async def js_publish_raw(
        self, subject: str, payload: bytes, msg_id: str | None = None, headers: dict[str, str] | None = None,
        retry_for_s: float = RETRY_FOR_S,
    ) -> PubAck:
        hdrs = inject_headers(headers) or {}
        hdrs["Nats-Msg-Id"] = msg_id or uuid.uuid4().hex
        return await with_retries(
            lambda: self.js.publish(subject, payload, timeout=ACK_TIMEOUT_S, headers=dict(hdrs)),
            what=f"publish to {subject}", retry_for_s=retry_for_s, closed=lambda: self.closing or self.nc.is_closed,
        )

    async def request(
        self,
        subject: str,
        model: BaseModel,
        reply_type: type[M],
        timeout: float = 2.0,
        headers: dict[str, str] | None = None,
    ) -> M:
        msg = await self.nc.request(subject, encode(model), timeout=timeout, headers=inject_headers(headers))
        return reply_type.model_validate_json(msg.data)

    async def request_raw(self, subject: str, payload: bytes, timeout: float = 2.0) -> Any:
        return await self.nc.request(subject, payload, timeout=timeout, headers=inject_headers())

    async def close(self) -> None:
        self.closing = True
        if self.nc.is_closed:
            return
        try:
            await asyncio.wait_for(self.nc.drain(), timeout=5)
        except Exception:
            await self.nc.close()
