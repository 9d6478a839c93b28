"""The control plane: values live in the `<prefix>_control` KV bucket and every change is also
broadcast. Readers load every key on start, then apply watcher and broadcast updates once each,
in revision order — so a late starter is never stale and a restart of NATS loses nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel

from shared.aio import cancel_and_wait
from shared.bus.client import Bus
from shared.bus.kv import kv_create, kv_put, kv_update
from shared.contract.models import ControlUpdate

log = logging.getLogger("agentix.bus.control")
# What `apply` returns is ignored unless it is a coroutine (then it is awaited).
Apply = Callable[[str, Any, int], Awaitable[None] | object]
WATCH_RETRY_S = 1.0


def topic_of(key: str) -> str:
    return key.split(".", 1)[0]


class ControlPlane:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._kv: KeyValue | None = None
        self._applied: dict[str, int] = {}
        self._watch_task: asyncio.Task[None] | None = None
        self._subscription: Any = None
        self.loaded = asyncio.Event()

    async def kv(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self.bus.js.key_value(self.bus.names.control_bucket)
        return self._kv

    async def put(self, key: str, value: BaseModel | dict[str, Any]) -> int:
        """KV first (durable), then broadcast. Returns the KV revision."""
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        revision = await kv_put(await self.kv(), key, json.dumps(data).encode())
        update = ControlUpdate(key=key, revision=revision, value=data)
        await self.bus.publish(self.bus.subjects.control(topic_of(key)), update)
        return revision

    async def put_if(self, key: str, value: BaseModel | dict[str, Any], last_revision: int) -> int:
        """Compare-and-set: write only if the key's latest KV revision is still `last_revision`
        (0: the key must not exist yet), then broadcast. Raises
        `nats.js.errors.KeyWrongLastSequenceError` when another writer got there first."""
        data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        kv = await self.kv()
        payload = json.dumps(data).encode()
        if last_revision:
            revision = await kv_update(kv, key, payload, last=last_revision)
        else:
            revision = await kv_create(kv, key, payload)  # also re-creates a deleted key
        update = ControlUpdate(key=key, revision=revision, value=data)
        await self.bus.publish(self.bus.subjects.control(topic_of(key)), update)
        return revision

    async def get(self, key: str) -> tuple[Any, int] | None:
        try:
            entry = await (await self.kv()).get(key)
        except KeyNotFoundError:
            return None
        if entry.value is None:
            return None
        return json.loads(entry.value), entry.revision or 0

    async def watch(self, apply: Apply, initial_timeout_s: float = 5.0) -> None:
        """Call `apply(key, value, revision)` for every current key and every later change.
        Returns once the current values were applied, so the caller never starts stale."""
        self._apply = apply
        self._subscription = await self.bus.nc.subscribe(
            self.bus.subjects.control(">"), cb=self._on_broadcast
        )
        await self._start_watcher()
        # After a server restart a KV watcher goes quiet for a while: make a fresh one.
        self.bus.on_reconnect(self._start_watcher)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.loaded.wait(), initial_timeout_s)

    async def _start_watcher(self) -> None:
        if self._watch_task:
            self._watch_task.cancel()
        self._kv = None
        self._watch_task = asyncio.create_task(self._watch_loop(), name="control-watch")

    async def _watch_loop(self) -> None:
        # A leader election of the bucket's stream can end a watcher (or fail its creation):
        # watch again; values are applied once per revision, so a replay does no harm.
        while True:
            try:
                watcher = await (await self.kv()).watchall()
                async for entry in watcher:
                    if entry is None:  # marker: every current value has been delivered
                        self.loaded.set()
                        continue
                    if entry.value is None or (entry.operation is not None and entry.operation != "PUT"):
                        continue
                    await self._maybe_apply(entry.key, json.loads(entry.value), entry.revision or 0)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("control watcher stopped (%s); watching again", exc)
                self._kv = None
                await asyncio.sleep(WATCH_RETRY_S)

    async def _on_broadcast(self, msg: Msg) -> None:
        try:
            update = ControlUpdate.model_validate_json(msg.data)
        except Exception:
            return
        await self._maybe_apply(update.key, update.value, update.revision)

    async def _maybe_apply(self, key: str, value: Any, revision: int) -> None:
        if revision <= self._applied.get(key, 0):
            return
        self._applied[key] = revision
        try:
            result = self._apply(key, value, revision)
            if asyncio.iscoroutine(result):
                await result
        except Exception:
            log.exception("applying control key %s failed", key)

    async def stop(self) -> None:
        await cancel_and_wait(self._watch_task)
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
