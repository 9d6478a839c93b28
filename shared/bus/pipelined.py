"""Pipelined JetStream publishes: a message is sent with a reply subject of its own under one
wildcard inbox per connection, and its ack resolves the future `publish` returned, so a
publisher sends a task's events and checkpoints without waiting for each one to be stored.

nats-py's `JetStreamContext.publish_async` does the same, but each publish also goes through
`asyncio.wait_for` on a semaphore, draws its reply token from `os.urandom`, and each ack is
turned into a `PubAck` by dataclass introspection: 28–38 µs of the client's CPU per publish and
ack, 19–30 µs here (measured with the embedded server, 20 publishes in flight). Its ack
callback also raises, instead of setting on the future, an error the stream answers (say, a
duplicate message id still being stored): that publish then waited out the ack timeout. Here
the error is the future's exception.

A future whose ack never comes (the message died with a leader, or in a socket that was
replaced) fails with `TimeoutError` once it is FORGET_S old, noticed on a later publish: the
callers settle acks long before that (`retry.settled`), and nothing waits forever or piles up.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref

import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import PubAck
from nats.js.errors import APIError, NoStreamResponseError

from shared.bus.retry import ACK_TIMEOUT_S

FORGET_S = 60.0
_NO_RESPONDERS = "503"  # the `Status` header of a publish that no stream took


class PipelinedPublishes:
    """The pipelined publishes of one connection (`pipeline_for`)."""

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self._prefix = ""
        self._start_lock = asyncio.Lock()
        self._tokens = itertools.count()
        # token → (future, sent at); insertion order is sending order, so the oldest comes first.
        self._waiting: dict[str, tuple[asyncio.Future[PubAck], float]] = {}

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str]) -> asyncio.Future[PubAck]:
        """Send to a stream; the future resolves with the ack, or fails with the stream's
        error (`APIError`), `NoStreamResponseError`, or `TimeoutError` after FORGET_S."""
        if not self._prefix:
            await self._start()
        now = time.monotonic()
        self._forget_older_than(now - FORGET_S)
        token = str(next(self._tokens))
        future: asyncio.Future[PubAck] = asyncio.get_running_loop().create_future()
        self._waiting[token] = (future, now)
        try:
            await self.nc.publish(subject, payload, reply=self._prefix + token, headers=headers)
        except BaseException:
            self._waiting.pop(token, None)  # an answer may have come while the send waited on a full buffer
            raise
        return future

    async def _start(self) -> None:
        async with self._start_lock:
            if not self._prefix:
                prefix = self.nc.new_inbox() + "."
                await self.nc.subscribe(prefix + "*", cb=self._on_ack)
                self._prefix = prefix

    async def _on_ack(self, msg: Msg) -> None:
        entry = self._waiting.pop(msg.subject[len(self._prefix):], None)
        if entry is None or entry[0].done():
            return
        future = entry[0]
        if msg.headers and msg.headers.get("Status") == _NO_RESPONDERS:
            future.set_exception(NoStreamResponseError())
            return
        try:
            answer = orjson.loads(msg.data)
            if "error" in answer:
                APIError.from_error(answer["error"])  # raises the error's own class (503, 404, …)
            ack = PubAck(stream=answer["stream"], seq=answer["seq"], domain=answer.get("domain"),
                         duplicate=answer.get("duplicate"))
        except Exception as exc:  # the stream's error, or an answer that is not an ack
            future.set_exception(exc)
            return
        future.set_result(ack)

    def _forget_older_than(self, cutoff: float) -> None:
        while self._waiting:
            token, (future, sent_at) = next(iter(self._waiting.items()))
            if sent_at > cutoff:
                return
            del self._waiting[token]
            if not future.done():
                future.set_exception(TimeoutError(f"no ack within {FORGET_S:g}s"))
                future.exception()  # seen: a caller that gave up on it long ago is not reported at exit


def connection_number(nc: Client) -> int:
    """Which of the client's connections a message goes out on now (its reconnects so far)."""
    return int(nc.stats["reconnects"])


def ack_time_left(nc: Client, sent_at: float, connection: int) -> float:
    """How much longer the ack of a publish sent at `sent_at` (monotonic) on connection
    `connection` may still be waited for: ACK_TIMEOUT_S from when it was sent, not from when the
    wait begins — a publisher settling the acks a dead leader took with it, one after the other,
    waited ACK_TIMEOUT_S for each in turn — and none once that connection was replaced (the
    message died in the old socket, or with the server that held it)."""
    if connection != connection_number(nc):
        return 0.0
    return max(0.0, sent_at + ACK_TIMEOUT_S - time.monotonic())


_PIPELINES: weakref.WeakKeyDictionary[Client, PipelinedPublishes] = weakref.WeakKeyDictionary()


def pipeline_for(nc: Client) -> PipelinedPublishes:
    """The connection's one `PipelinedPublishes` (one inbox subscription per connection)."""
    pipeline = _PIPELINES.get(nc)
    if pipeline is None:
        pipeline = _PIPELINES[nc] = PipelinedPublishes(nc)
    return pipeline
