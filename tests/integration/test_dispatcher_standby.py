"""A redelivered task and the run that may still hold it (services/dispatcher/standby.py), on a
real NATS server: the task message is taken from the dispatchers' own consumer, and "the other
dispatcher" is a second `StandBy` answering `tasks.running.<id>` on its own connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from services.dispatcher.standby import StandBy
from shared.bus import Bus
from shared.bus.delivery import Ack, Delivery
from shared.bus.events import EventPublisher, read_events
from shared.contract.events import DoneEvent, finish_task
from shared.contract.task import TaskMessage
from tests.conftest import make_settings
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually

TASK = "t-standby"
LEASE_S = 1.0
ASK_S = 0.3
DSL = {"version": "1", "nodes": [{"id": "in", "kind": "input"}, {"id": "out", "kind": "output"}],
       "edges": [{"source": "in", "target": "out"}]}


class OtherDispatcher:
    """Answers for TASK while `alive`; `skip` queries (counted from now) go unanswered."""

    def __init__(self) -> None:
        self.alive = True
        self.queries = 0
        self.skip: set[int] = set()
        self.standby: StandBy | None = None

    def runs(self, task_id: str) -> bool:
        self.queries += 1
        return task_id == TASK and self.alive and self.queries not in self.skip

    async def serve(self, bus: Bus) -> Any:
        self.standby = StandBy(bus, self.runs, lease_s=LEASE_S, ask_s=ASK_S)
        return await bus.nc.subscribe(bus.subjects.running(TASK), cb=self.standby.on_query)

    async def answered_more(self, count: int) -> None:
        target = self.queries + count
        await eventually(lambda: _true(self.queries >= target), attempts=200, every_s=0.05)


@pytest.fixture
async def buses(nats_server: NatsServer, tmp_path: Path) -> AsyncIterator[tuple[Bus, Bus]]:
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=30.0)
    here, other = await Bus.connect(settings, name="here"), await Bus.connect(settings, name="other")
    await here.declare()
    yield here, other
    await here.close()
    await other.close()


async def redelivered(bus: Bus) -> Delivery:
    """The task's message as the dispatchers' consumer hands it out (nobody acks it here)."""
    await bus.js_publish(bus.subjects.tasks_submit, TaskMessage(task_id=TASK, user_id="u1", dsl=DSL), msg_id=TASK)
    sub = await bus.js.pull_subscribe_bind(durable=bus.names.dispatcher_consumer, stream=bus.names.tasks_stream)
    [msg] = await sub.fetch(1, timeout=10)
    return Delivery(msg, max_deliver=5, on_settled=lambda _: None)


async def test_nobody_runs_it_is_a_takeover_at_once(buses: tuple[Bus, Bus]) -> None:
    here, _ = buses
    delivery = await redelivered(here)
    assert await StandBy(here, lambda _: False, lease_s=LEASE_S, ask_s=ASK_S).other_run(TASK, delivery) == "none"


async def test_a_run_silent_for_less_than_a_lease_is_still_waited_for_then_taken_for_dead(
        buses: tuple[Bus, Bus]) -> None:
    here, there = buses
    other = OtherDispatcher()
    sub = await other.serve(there)
    delivery = await redelivered(here)
    standby = StandBy(here, lambda _: False, lease_s=LEASE_S, ask_s=ASK_S)
    waiting = asyncio.create_task(standby.other_run(TASK, delivery))
    try:
        await other.answered_more(1)
        other.skip = {other.queries + 1}  # the next ask times out: a blip shorter than a lease
        await other.answered_more(3)
        assert not waiting.done()  # the blip was not taken for a death
        other.alive = False  # the dispatcher is gone, its message still queued
        assert await asyncio.wait_for(waiting, 30) == "died"
    finally:
        waiting.cancel()
        await sub.unsubscribe()


async def test_a_run_that_ended_and_acked_is_answered_without_waiting_a_lease(buses: tuple[Bus, Bus]) -> None:
    here, there = buses
    other = OtherDispatcher()
    sub = await other.serve(there)
    delivery = await redelivered(here)
    standby = StandBy(here, lambda _: False, lease_s=600.0, ask_s=ASK_S)  # a lease the test never waits out
    waiting = asyncio.create_task(standby.other_run(TASK, delivery))
    try:
        await other.answered_more(2)
        await delivery.settle(Ack(sync=True))  # the run ends: its message is acked, then it stops answering
        await sub.unsubscribe()
        assert await asyncio.wait_for(waiting, 30) == "answered"
    finally:
        waiting.cancel()


async def test_this_dispatchers_own_run_ending_without_an_ack_is_taken_over_at_once(
        buses: tuple[Bus, Bus]) -> None:
    here, _ = buses
    delivery = await redelivered(here)
    running = {TASK}
    asked = asyncio.Event()

    def runs_here(task_id: str) -> bool:
        asked.set()
        return task_id in running

    standby = StandBy(here, runs_here, lease_s=600.0, ask_s=ASK_S)
    waiting = asyncio.create_task(standby.other_run(TASK, delivery))
    try:
        await asked.wait()  # it took the first answer: "here"
        running.clear()  # the run here ended (e.g. crashed) and left its message queued
        assert await asyncio.wait_for(waiting, 30) == "died"
    finally:
        waiting.cancel()


async def test_a_redelivered_task_whose_log_ended_is_acked_and_not_run_again(
        nats_server: NatsServer, tmp_path: Path) -> None:
    """Its run ended and dropped the checkpoint, but the ack never reached the server."""
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=1.0)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    try:
        delivery = await redelivered(bus)  # delivery 1, never acked
        await finish_task(EventPublisher(bus, TASK), TASK, "done", output={"out": "first run"})
        async with dispatcher(settings):  # handed delivery 2 after the ack wait

            async def acked() -> bool:
                with contextlib.suppress(NotFoundError):
                    await bus.js.get_msg(bus.names.tasks_stream, delivery.seq)
                    return False
                return True

            await eventually(acked, attempts=600, every_s=0.05)
        log = [e async for _, e in read_events(bus, TASK, follow=False)]
        assert [(e.type, getattr(e, "status", None)) for e in log] == [("status", "done"), ("done", "done")]
    finally:
        await bus.close()


async def test_a_dead_dispatchers_task_is_taken_over_without_waiting_a_lease(
        nats_server: NatsServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The dispatcher handed the redelivery hears "no responders": its own subscriptions answer
    only for its own runs, so it is not a responder to its own ask and does not stand by."""
    settings = make_settings(nats_server.url, tmp_path / "data", task_ack_wait_s=1.0)
    bus = await Bus.connect(settings, name="test")
    await bus.declare()
    caplog.set_level(logging.INFO, logger="agentix.dispatcher.standby")
    try:
        await redelivered(bus)  # delivery 1 went to a dispatcher that died holding it
        ended: DoneEvent | None = None
        async with dispatcher(settings), asyncio.timeout(60):  # handed delivery 2 after the ack wait
            async for _, event in read_events(bus, TASK, follow=True):
                if isinstance(event, DoneEvent):
                    ended = event
                    break
        assert ended is not None  # it ran (how the tiny graph ends does not matter here)
        said = [r.getMessage() for r in caplog.records if r.name == "agentix.dispatcher.standby"]
        assert said == []  # neither "standing by" nor "no dispatcher said it runs it for …"
    finally:
        await bus.close()


async def _true(value: bool) -> bool:
    return value
