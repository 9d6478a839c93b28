"""The JetStream work-queue worker every queue consumer runs (tasks in the dispatcher, ingest
jobs in tools_go_equiv); the modules that use it keep only what a message means.

- **Pulling**: from the queue's durable consumer on `PullLoop`, only as much as there is room
  for: at most `concurrency` handler calls at once, at most `capacity` unanswered messages.
- **Handlers**: per message (`handle`, which returns its `Verdict`) or per batch of up to
  `max_batch` messages (`handle_batch`, which settles each `Delivery` itself).
- **Leases**: while a handler runs, each of its unanswered messages is renewed
  (`in_progress`) every third of the consumer's ack wait, so JetStream never hands a live
  message to another worker.
- **Bounded deliveries**: the consumer's `max_deliver`. `on_exhausted(payload, deliveries)`
  records a message that will not be delivered again: at once when its handler raises on the
  last delivery (then the message is terminated), or, when its workers all died, on the
  server's advisory kept in the dead letters (`dead_letters.py`; then the message is deleted).
  An earlier delivery that raises comes back after `crash_retry_s`, or without it after the
  ack wait.
- **Drain**: stop pulling, let running handlers finish within a grace period, then cancel the
  rest; their unanswered messages are nak'ed so another replica takes them over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from shared.aio import cancel_and_wait
from shared.bus.client import Bus
from shared.bus.dead_letters import DeadLetters
from shared.bus.delivery import Delivery, Nak, Term, Verdict
from shared.bus.pull import PullLoop

log = logging.getLogger("agentix.bus.workqueue")
# None: the handler has settled the message itself, or leaves it to come back after the ack wait.
MessageHandler = Callable[[Delivery], Awaitable[Verdict | None]]
BatchHandler = Callable[[list[Delivery]], Awaitable[None]]
# Records the failure of a message (its payload) after its last delivery; raising means "not
# recorded", and the dead letter is tried again.
ExhaustedHandler = Callable[[bytes, int], Awaitable[None]]
MIN_RENEW_S = 0.2
# A fetch under way when draining starts may still end and hand its messages over.
FETCH_GRACE_S = 2.5


class WorkQueue:
    def __init__(
        self,
        bus: Bus,
        stream: str,
        durable: str,
        *,
        on_exhausted: ExhaustedHandler,
        handle: MessageHandler | None = None,
        handle_batch: BatchHandler | None = None,
        concurrency: int,
        capacity: int,
        capacity_from_consumer: bool = False,
        max_batch: int = 1,
        ack_wait_s: float,
        max_deliver: int,
        fetch_wait_s: float = 1.0,
        crash_retry_s: float | None = None,
    ) -> None:
        """`ack_wait_s`, `max_deliver` and (with `capacity_from_consumer`) `capacity` are what this
        process's settings say; the declared consumer is the truth and replaces them if it can be
        read (it may predate the current settings)."""
        if (handle is None) == (handle_batch is None):
            raise ValueError("give exactly one of handle and handle_batch")
        if handle is not None and max_batch != 1:
            raise ValueError("a per-message handler takes one message at a time")
        self.bus = bus
        self.stream = stream
        self.durable = durable
        self.concurrency = max(1, concurrency)
        self.capacity = max(1, capacity)
        self.capacity_from_consumer = capacity_from_consumer
        self.max_batch = max(1, max_batch)
        self.batch = 1
        self.ack_wait_s = ack_wait_s
        self.max_deliver = max_deliver
        self.crash_retry_s = crash_retry_s
        self.handled = 0  # handler calls that have ended
        self._handle = handle
        self._handle_batch = handle_batch
        self._on_exhausted = on_exhausted
        self._unanswered = 0
        self._calls: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()
        self._stopping = False
        self._pull = PullLoop(bus, stream, durable, self._take, room=self._room, fetch_wait_s=fetch_wait_s,
                              retry_s=0.5)
        self._dead = DeadLetters(bus, durable, self._dead_letter)

    @property
    def inflight(self) -> int:
        """Messages taken and not yet answered."""
        return self._unanswered

    @property
    def running(self) -> int:
        """Handler calls under way."""
        return len(self._calls)

    @property
    def pulling(self) -> bool:
        """The pull loop is alive (False before `start`, after `drain`, or when it died)."""
        return self._pull.alive

    async def start(self) -> None:
        with contextlib.suppress(Exception):
            config = (await self.bus.js.consumer_info(self.stream, self.durable)).config
            self.max_deliver = config.max_deliver or self.max_deliver
            self.ack_wait_s = config.ack_wait or self.ack_wait_s
            if self.capacity_from_consumer and config.max_ack_pending and config.max_ack_pending > 0:
                self.capacity = config.max_ack_pending
        # `concurrency` batches fill the capacity: while one is being finished, the next is taken.
        self.batch = max(1, min(self.max_batch, -(-self.capacity // self.concurrency)))
        await self._dead.start()
        await self._pull.start()

    async def drain(self, grace_s: float) -> None:
        """Stop taking work; let running handlers finish within `grace_s`, then cancel the rest
        and hand their unanswered messages back."""
        self._stopping = True
        self._freed.set()
        await self._pull.stop(grace_s=self._pull.fetch_wait_s + FETCH_GRACE_S)
        await self._dead.stop()
        if self._calls:
            _, pending = await asyncio.wait(set(self._calls), timeout=grace_s)
            await asyncio.gather(*(cancel_and_wait(task) for task in pending))

    # -- pulling ------------------------------------------------------------------------------------
    async def _room(self) -> int:
        """Wait until another handler call and another message fit; how many messages to ask for
        (0 once draining). Asking for more than the consumer would hand out makes a fetch wait
        its full time."""
        while not self._stopping:
            calls = self.concurrency - len(self._calls)
            messages = self.capacity - self._unanswered
            if calls > 0 and messages > 0:
                return min(messages, calls * self.batch)
            self._freed.clear()
            await self._freed.wait()
        return 0

    async def _take(self, msgs: list[Msg]) -> None:
        self._unanswered += len(msgs)
        for start in range(0, len(msgs), self.batch):
            batch = [Delivery(msg, self.max_deliver, self._answered) for msg in msgs[start:start + self.batch]]
            call = asyncio.create_task(self._call(batch), name=f"{self.durable}-handler")
            self._calls.add(call)
            call.add_done_callback(self._call_done)

    def _answered(self, _: Delivery) -> None:
        self._unanswered -= 1
        self._freed.set()

    def _call_done(self, call: asyncio.Task[None]) -> None:
        self._calls.discard(call)
        self.handled += 1
        self._freed.set()
        if not call.cancelled() and call.exception() is not None:
            log.error("%s: a handler call crashed", self.durable, exc_info=call.exception())

    # -- one handler call ---------------------------------------------------------------------------
    async def _call(self, batch: list[Delivery]) -> None:
        lease = asyncio.create_task(self._keep_leases(batch))
        try:
            if self._handle_batch is not None:
                await self._handle_batch(batch)
            else:
                assert self._handle is not None
                verdict = await self._handle(batch[0])
                if verdict is not None:
                    await batch[0].settle(verdict)
        except asyncio.CancelledError:
            # Drain's grace is over: the handler's progress is its own to keep; hand the message
            # over now rather than after the ack wait.
            for delivery in batch:
                if not delivery.settled:
                    with contextlib.suppress(Exception):
                        await delivery.settle(Nak())
            raise
        except Exception:
            await self._crashed(batch)
        finally:
            lease.cancel()
            for delivery in batch:
                if not delivery.settled:  # left for redelivery: no longer ours to count
                    self._answered(delivery)

    async def _keep_leases(self, batch: list[Delivery]) -> None:
        interval = max(MIN_RENEW_S, self.ack_wait_s / 3)
        while True:
            await asyncio.sleep(interval)
            for delivery in batch:
                await delivery.renew()

    async def _crashed(self, batch: list[Delivery]) -> None:
        unanswered = [d for d in batch if not d.settled]
        if self.crash_retry_s is not None:
            then = f"it comes back in {self.crash_retry_s:g}s"
        else:  # e.g. NATS or the KV store is in trouble: the ack wait gives it time
            then = "it comes back after the ack wait"
        log.exception("%s: handling %d message(s) failed; unless it was the last delivery, %s",
                      self.durable, len(unanswered), then)
        for delivery in unanswered:
            if delivery.last:
                await self._exhausted(delivery)
            elif self.crash_retry_s is not None:
                with contextlib.suppress(Exception):
                    await delivery.settle(Nak(delay=self.crash_retry_s))

    async def _exhausted(self, delivery: Delivery) -> None:
        """The last delivery failed: record it now rather than wait for the advisory."""
        try:
            await self._on_exhausted(delivery.data, delivery.attempt)
            await delivery.settle(Term())  # no redelivery and no MAX_DELIVERIES advisory
        except Exception:  # e.g. NATS is down: the advisory (kept as a dead letter) records it
            log.exception("%s: recording the exhausted message %d failed", self.durable, delivery.seq)

    async def _dead_letter(self, seq: int, deliveries: int) -> None:
        """Every delivery of the message at `seq` ended without an answer (its workers died or
        hung): record it, then remove it from the queue."""
        try:
            raw = await self.bus.js.get_msg(self.stream, seq)
        except NotFoundError:  # already handled (or the stream was purged)
            return
        await self._on_exhausted(raw.data or b"", deliveries)
        with contextlib.suppress(NotFoundError):
            await self.bus.js.delete_msg(self.stream, seq)
