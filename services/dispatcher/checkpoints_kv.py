"""Checkpoints in the JetStream KV bucket `agentix_checkpoints` (key = task id).

Writes are pipelined: `save` sends the put without waiting for its ack, and `flush` (called by
the runner before a task is parked or ended, and so before the task message is acked) waits
for every ack and raises if one failed. This is as safe as awaiting each put for the case that
matters — a dispatcher that dies: a put is sent on the same connection, in order, before any
request the next node makes, so no later side effect can reach a tool service ahead of the
checkpoint of the node before it.

A leader election is not a failure: a put whose ack fails or never comes is settled by putting
the task's *latest* checkpoint again (each checkpoint is the whole state, so the latest is all
that must be stored) with that checkpoint's own `Nats-Msg-Id`, retried through the election
(`shared.bus.kv`). If it had been stored after all, the stream drops the copy as a duplicate: an
older checkpoint never overwrites a newer one and a retry adds no revision.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from dataclasses import dataclass

from nats.js.api import PubAck
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from services.dispatcher.engine.checkpoint import Checkpoint
from shared.bus.kv import key_subject, kv_get, kv_put
from shared.bus.pipelined import ack_time_left, connection_number, pipeline_for
from shared.bus.retry import BusWriteError, is_transient, settled, with_retries
from shared.errors import AgentixError

MAX_PENDING = 256


class CheckpointWriteError(AgentixError, RuntimeError):
    """A checkpoint could not be stored (the task's message is not acked, so it comes back)."""

    code = "checkpoint_write_failed"
    http_status = 503
    retryable = True


@dataclass
class _Put:
    task_id: str
    msg_id: str
    data: bytes
    ack: asyncio.Future[PubAck]
    sent_at: float  # monotonic
    connection: int  # `connection_number` when it was sent


class KVCheckpointStore:
    def __init__(self, kv: KeyValue, *, pipelined: bool = True) -> None:
        self.kv = kv
        self.pipelined = pipelined
        self._pending: deque[_Put] = deque()
        self._latest: dict[str, _Put] = {}  # per task, the newest put still pending

    async def load(self, task_id: str) -> Checkpoint | None:
        await self.flush()  # read our own writes
        try:
            entry = await kv_get(self.kv, task_id)
        except KeyNotFoundError:
            return None
        except BusWriteError as exc:
            raise CheckpointWriteError(f"checkpoint read failed: {exc}") from exc
        if not entry.value:  # a delete/purge marker
            return None
        return Checkpoint.from_bytes(entry.value)

    async def save(self, checkpoint: Checkpoint) -> None:
        data = checkpoint.to_bytes()
        msg_id = uuid.uuid4().hex
        if not self.pipelined:
            await self._put(checkpoint.task_id, data, msg_id)
            return
        await self._reap()
        # nats-py's KeyValue.put is publish-and-wait on "$KV.<bucket>.<key>"; this is the same
        # publish without the wait.
        nc = self.kv._js._nc
        sent_at, connection = time.monotonic(), connection_number(nc)
        try:
            ack = await pipeline_for(nc).publish(key_subject(self.kv, checkpoint.task_id), data,
                                                 {"Nats-Msg-Id": msg_id})
        except Exception as exc:  # settled (retried) like a failed ack
            ack = asyncio.get_running_loop().create_future()
            ack.set_exception(exc)
        put = _Put(checkpoint.task_id, msg_id, data, ack, sent_at, connection)
        self._pending.append(put)
        self._latest[put.task_id] = put
        while len(self._pending) > MAX_PENDING:
            await self._settle(self._pending.popleft())

    async def flush(self) -> None:
        while self._pending:
            await self._settle(self._pending.popleft())

    async def delete(self, task_id: str) -> None:
        await self.flush()
        try:
            # A purge repeated by a retry leaves the same state: no value, no history.
            await with_retries(lambda: self.kv.purge(task_id), what=f"purging the checkpoint of {task_id}")
        except KeyNotFoundError:
            pass

    async def _reap(self) -> None:
        """Drop acked writes from the front; settle a failed one before anything new is sent."""
        while self._pending and self._pending[0].ack.done():
            await self._settle(self._pending.popleft())

    async def _settle(self, put: _Put) -> None:
        try:
            await settled(put.ack, ack_time_left(self.kv._js._nc, put.sent_at, put.connection))
        except Exception as exc:
            if not is_transient(exc):
                raise CheckpointWriteError(f"checkpoint write failed: {exc}") from exc
            await self._repair(put.task_id)
        if self._latest.get(put.task_id) is put:
            del self._latest[put.task_id]

    async def _repair(self, task_id: str) -> None:
        """Make sure the newest checkpoint of `task_id` sent so far is stored."""
        latest = self._latest.get(task_id)
        if latest is None:  # a newer put of this task was settled (stored) already
            return
        await self._put(task_id, latest.data, latest.msg_id)

    async def _put(self, task_id: str, data: bytes, msg_id: str) -> None:
        try:
            await kv_put(self.kv, task_id, data, msg_id=msg_id)
        except Exception as exc:
            raise CheckpointWriteError(f"checkpoint write failed: {exc}") from exc
