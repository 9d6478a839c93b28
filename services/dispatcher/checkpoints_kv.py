"""Checkpoints in the JetStream KV bucket `agentix_checkpoints` (key = task id).

Writes are pipelined: `save` sends the put without waiting for its ack, and `flush` (called by
the runner before a task is parked or ended, and so before the task message is acked) waits
for every ack and raises if one failed. This is as safe as awaiting each put for the case that
matters — a dispatcher that dies: a put is sent on the same connection, in order, before any
request the next node makes, so no later side effect can reach a tool service ahead of the
checkpoint of the node before it.
"""

from __future__ import annotations

import asyncio
from collections import deque

from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from services.dispatcher.engine.checkpoint import Checkpoint

MAX_PENDING = 256


class CheckpointWriteError(RuntimeError):
    pass


class KVCheckpointStore:
    def __init__(self, kv: KeyValue, *, pipelined: bool = True) -> None:
        self.kv = kv
        self.pipelined = pipelined
        self._pending: deque[asyncio.Future] = deque()

    async def load(self, task_id: str) -> Checkpoint | None:
        await self.flush()  # read our own writes
        try:
            entry = await self.kv.get(task_id)
        except KeyNotFoundError:
            return None
        if not entry.value:  # a delete/purge marker
            return None
        return Checkpoint.from_bytes(entry.value)

    async def save(self, checkpoint: Checkpoint) -> None:
        data = checkpoint.to_bytes()
        if not self.pipelined:
            await self.kv.put(checkpoint.task_id, data)
            return
        self._reap()
        # nats-py's KeyValue.put is publish-and-wait on "$KV.<bucket>.<key>"; this is the same
        # publish without the wait.
        future = await self.kv._js.publish_async(f"{self.kv._pre}{checkpoint.task_id}", data)
        self._pending.append(future)
        while len(self._pending) > MAX_PENDING:
            await self._settle(self._pending.popleft())

    async def flush(self) -> None:
        while self._pending:
            await self._settle(self._pending.popleft())

    async def delete(self, task_id: str) -> None:
        await self.flush()
        try:
            await self.kv.purge(task_id)
        except KeyNotFoundError:
            pass

    def _reap(self) -> None:
        """Drop acked writes from the front; raise on the first failed one."""
        while self._pending and self._pending[0].done():
            future = self._pending.popleft()
            if future.exception() is not None:
                raise CheckpointWriteError(f"checkpoint write failed: {future.exception()}")

    @staticmethod
    async def _settle(future: asyncio.Future) -> None:
        try:
            await future
        except Exception as exc:
            raise CheckpointWriteError(f"checkpoint write failed: {exc}") from exc
