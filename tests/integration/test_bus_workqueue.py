"""The work-queue worker (shared/bus/workqueue.py) against a real nats-server, on the tasks
queue of a deployment whose consumer has a short ack wait and two deliveries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.bus import Bus
from shared.bus.delivery import Ack, Delivery, Nak, Term, Verdict
from shared.bus.workqueue import WorkQueue
from shared.contract.events import StatusEvent
from shared.settings import Settings
from tests.conftest import make_settings
from tests.support.nats_server import NatsServer

ACK_WAIT_S = 1.0
WAIT_S = 20.0


@pytest.fixture
def settings(nats_server: NatsServer, tmp_path: Path) -> Settings:
    return make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=ACK_WAIT_S, task_max_deliver=2)


@pytest.fixture
async def publish(bus: Bus) -> AsyncIterator[object]:
    async def send(key: str) -> None:
        await bus.js_publish(bus.subjects.tasks_submit, StatusEvent(task_id=key, status="x"), msg_id=key)

    yield send


def queue(bus: Bus, *, handle: object = None, handle_batch: object = None, exhausted: object = None,
          concurrency: int = 4, max_batch: int = 1) -> WorkQueue:
    async def record(data: bytes, deliveries: int) -> None:  # not expected unless given
        raise AssertionError(f"unexpected exhaustion of {data!r}")

    n = bus.names
    return WorkQueue(
        bus, n.tasks_stream, n.dispatcher_consumer, handle=handle, handle_batch=handle_batch,  # type: ignore[arg-type]
        on_exhausted=exhausted or record,  # type: ignore[arg-type]
        concurrency=concurrency, capacity=concurrency * max_batch, max_batch=max_batch,
        ack_wait_s=30.0, max_deliver=5, fetch_wait_s=0.2,
    )


async def left(bus: Bus) -> int:
    return (await bus.js.stream_info(bus.names.tasks_stream)).state.messages


async def until(condition: object) -> None:
    """Poll the server's state (nothing announces it) for up to WAIT_S."""
    for _ in range(int(WAIT_S / 0.05)):
        if await condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition never held")


async def test_the_consumer_is_the_truth_and_verdicts_answer_messages(bus: Bus, publish: object) -> None:
    seen: list[tuple[str, int]] = []
    verdicts: dict[str, list[Verdict]] = {"ack": [Ack()], "sync": [Ack(sync=True)], "term": [Term()],
                                          "again": [Nak(delay=0.1), Ack()]}

    async def handle(d: Delivery) -> Verdict:
        key = StatusEvent.model_validate_json(d.data).task_id
        seen.append((key, d.attempt))
        return verdicts[key][d.attempt - 1]

    wq = queue(bus, handle=handle)
    await wq.start()
    try:
        assert (wq.max_deliver, wq.ack_wait_s) == (2, ACK_WAIT_S)  # the declared consumer, not the arguments
        for key in verdicts:
            await publish(key)  # type: ignore[operator]

        async def all_answered() -> bool:
            return await left(bus) == 0 and wq.running == 0

        await until(all_answered)
    finally:
        await wq.drain(1.0)
    assert sorted(seen) == [("ack", 1), ("again", 1), ("again", 2), ("sync", 1), ("term", 1)]
    assert wq.inflight == 0


async def test_a_lease_is_renewed_while_the_handler_works(bus: Bus, publish: object) -> None:
    attempts: list[int] = []

    async def handle(d: Delivery) -> Verdict:
        attempts.append(d.attempt)
        await asyncio.sleep(ACK_WAIT_S * 3)  # three ack waits: without renewal it would come back
        return Ack(sync=True)

    wq = queue(bus, handle=handle)
    await wq.start()
    try:
        await publish("slow")  # type: ignore[operator]

        async def answered() -> bool:
            return await left(bus) == 0

        await until(answered)
    finally:
        await wq.drain(1.0)
    assert attempts == [1]


async def test_a_crash_on_the_last_delivery_is_recorded_and_terminated(bus: Bus, publish: object) -> None:
    attempts: list[int] = []
    recorded: list[tuple[bytes, int]] = []

    async def handle(d: Delivery) -> Verdict:
        attempts.append(d.attempt)
        raise RuntimeError("poison")

    async def exhausted(data: bytes, deliveries: int) -> None:
        recorded.append((data, deliveries))

    wq = queue(bus, handle=handle, exhausted=exhausted)
    await wq.start()
    try:
        await publish("poison")  # type: ignore[operator]

        async def gone() -> bool:
            return bool(recorded) and await left(bus) == 0

        await until(gone)
    finally:
        await wq.drain(1.0)
    assert attempts == [1, 2]  # the first crash waits out the ack wait; the second is the last
    assert len(recorded) == 1 and recorded[0][1] == 2
    assert StatusEvent.model_validate_json(recorded[0][0]).task_id == "poison"


async def test_handler_calls_and_batches_are_bounded(bus: Bus, publish: object) -> None:
    running = 0
    most = 0
    sizes: list[int] = []

    async def handle_batch(batch: list[Delivery]) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        sizes.append(len(batch))
        await asyncio.sleep(0.1)
        for d in batch:
            await d.settle(Ack())
        running -= 1

    for i in range(12):
        await publish(f"m{i}")  # type: ignore[operator]
    wq = queue(bus, handle_batch=handle_batch, concurrency=2, max_batch=3)
    await wq.start()
    try:
        async def emptied() -> bool:
            return await left(bus) == 0 and wq.running == 0

        await until(emptied)
    finally:
        await wq.drain(1.0)
    assert most <= 2 and max(sizes) <= 3 and sum(sizes) == 12


async def test_drain_hands_unfinished_messages_back(bus: Bus, publish: object) -> None:
    started = asyncio.Event()

    async def stuck(d: Delivery) -> Verdict:
        started.set()
        await asyncio.Event().wait()  # never finishes on its own
        return Ack()

    first = queue(bus, handle=stuck)
    await first.start()
    await publish("stuck")  # type: ignore[operator]
    await asyncio.wait_for(started.wait(), WAIT_S)
    await first.drain(0.1)
    assert first.running == 0 and first.inflight == 0

    attempts: list[int] = []

    async def finish(d: Delivery) -> Verdict:
        attempts.append(d.attempt)
        return Ack(sync=True)

    second = queue(bus, handle=finish)
    await second.start()
    try:
        async def answered() -> bool:
            return await left(bus) == 0

        await until(answered)
    finally:
        await second.drain(1.0)
    assert attempts == [2]  # handed back, and taken by the next worker
