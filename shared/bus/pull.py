"""A durable pull consumer run as a background task: fetch a batch, hand it to the handler, and
ride out disconnects (the client reconnects by itself; fetching resumes when it has).

Every pull consumer of the project runs on this loop: the recorder and the dead letters with a
fixed batch, the work-queue workers (`workqueue.py`) with `room`, which waits until they can
take more work and says how many messages to ask for."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout

from shared.aio import cancel_and_wait, wait_set
from shared.bus.client import Bus

log = logging.getLogger("agentix.bus.pull")
BatchHandler = Callable[[list[Msg]], Awaitable[None]]
Room = Callable[[], Awaitable[int]]  # waits for free capacity; how many messages to fetch (0: stop)


class PullLoop:
    def __init__(
        self,
        bus: Bus,
        stream: str,
        durable: str,
        handle: BatchHandler,
        batch: int = 100,
        *,
        room: Room | None = None,
        fetch_wait_s: float = 1.0,
        retry_s: float = 1.0,
        linger_s: float = 0.0,
    ) -> None:
        """`linger_s`: after a batch that did not fill `batch`, wait this long before fetching
        again, so messages that trickle in are handled in fewer, larger batches (a handler whose
        cost is mostly per batch, like a database transaction); the first message after a quiet
        spell is still handled as soon as it comes."""
        self.bus = bus
        self.stream = stream
        self.durable = durable
        self.handle = handle
        self.batch = batch
        self.fetch_wait_s = fetch_wait_s
        self.retry_s = retry_s
        self.linger_s = linger_s
        self._room = room
        self._stopping = asyncio.Event()
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        """The loop runs (False before `start`, after `stop`, or when it died)."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        self._sub = await self.bus.js.pull_subscribe_bind(durable=self.durable, stream=self.stream)
        self._task = asyncio.create_task(self._run(), name=f"pull-{self.durable}")

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop fetching. Within `grace_s` a fetch under way may end and hand its messages to
        the handler (cut short, they would wait out the ack wait unseen); then the loop is
        cancelled. The subscription goes too: a fetch cut short can leave its queue unfinished,
        and the connection's drain at exit would then wait out its timeout."""
        self._stopping.set()
        if self._task is not None and grace_s > 0:
            await asyncio.wait([self._task], timeout=grace_s)
        await cancel_and_wait(self._task)
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _run(self) -> None:
        while not self._stopping.is_set():
            want = self.batch if self._room is None else await self._room()
            if want <= 0:  # the owner is stopping
                return
            try:
                msgs = await self._sub.fetch(want, timeout=self.fetch_wait_s)
            except (NatsTimeout, TimeoutError):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # disconnected: wait for the reconnect
                log.warning("%s: fetch failed (%s); retrying", self.durable, exc)
                await asyncio.sleep(self.retry_s)
                continue
            try:
                await self.handle(msgs)
            except Exception:  # a bug must not stop the consumer; the batch comes back after ack_wait
                log.exception("%s: handling a batch of %d failed", self.durable, len(msgs))
            if self.linger_s > 0 and len(msgs) < want:
                await wait_set(self._stopping, self.linger_s)
