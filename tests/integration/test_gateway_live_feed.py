"""The live feed of a task the gateway has just created (`POST /tasks/stream`): it follows the
events as the stream republishes them, with no JetStream consumer, and whatever it misses — an
event that came before it subscribed, or the last one, lost where no later event shows the gap —
it reads from the stream, so every client still gets every event once, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import nats.errors
import pytest

from services.gateway.embedded import EmbeddedGateway
from services.gateway.runs import feed as feed_module
from services.gateway.runs.feed import RunFeeds
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events, reader_js
from shared.contract.events import DoneEvent, NodeStartEvent, StatusEvent, TokenEvent
from tests.integration.test_gateway_sse import DSL, frames
from tests.support.wait import eventually


async def consumers(bus: Bus) -> int:
    return (await bus.js.stream_info(bus.names.events_stream)).state.consumer_count


async def test_a_task_submitted_and_followed_in_one_request_needs_no_consumer(gw: EmbeddedGateway) -> None:
    bus: Bus = gw.app.state.bus
    before = await consumers(bus)  # the recorder's and the conversation queue's
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=20) as client:
        async with client.stream("POST", "/api/v1/tasks/stream", json={"dsl": DSL, "input": {"text": "q"}}) as resp:
            task_id = resp.headers["agentix-task-id"]
            seen = frames(resp)
            publisher = EventPublisher(bus, task_id)
            await publisher.emit(StatusEvent(task_id=task_id, status="running"))
            first = await anext(seen)
            assert (first.event, await consumers(bus)) == ("status", before)  # read live, no consumer
            for word in ("a", "b", "c"):
                await publisher.emit(TokenEvent(task_id=task_id, node_id="ans", text=word))
            await publisher.emit(StatusEvent(task_id=task_id, status="done"))
            await publisher.emit(DoneEvent(task_id=task_id, status="done", output={"out": "abc"}))
            rest = [f async for f in seen]
    live = [first, *rest]
    assert [f.event for f in live] == ["status", "token", "token", "token", "status", "done"]
    stored = [seq async for seq, _ in read_events(bus, task_id)]
    assert [f.id for f in live] == stored  # the ids are the stream sequences, as GET …/events gives


async def collect(feeds: RunFeeds, task_id: str) -> list[tuple[int, str]]:
    """What a client of the task's feed gets: (stream sequence, event type) until `done`."""
    out: list[tuple[int, str]] = []
    async for batch in feeds.follow(task_id, 0):
        out.extend((entry.seq, entry.event.type) for entry in batch)
    return out


@pytest.fixture
async def feeds(bus: Bus) -> AsyncIterator[RunFeeds]:
    opened = RunFeeds(bus)
    yield opened
    await opened.close()


async def test_events_stored_before_the_feed_subscribed_are_read_from_the_stream(
    bus: Bus, feeds: RunFeeds
) -> None:
    publisher = EventPublisher(bus, "t_missed")
    await publisher.emit(StatusEvent(task_id="t_missed", status="running"))
    await publisher.emit(NodeStartEvent(task_id="t_missed", node_id="ans", kind="agent"))
    await publisher.flush()  # stored and republished with nobody listening: the feed never sees them
    await feeds.open_for_new_run("t_missed")
    reader = asyncio.create_task(collect(feeds, "t_missed"))
    await publisher.emit(TokenEvent(task_id="t_missed", node_id="ans", text="x"))  # n=3: two are missing
    await publisher.emit(StatusEvent(task_id="t_missed", status="done"))
    await publisher.emit(DoneEvent(task_id="t_missed", status="done"))
    got = await asyncio.wait_for(reader, 20)
    stored = [seq async for seq, _ in read_events(bus, "t_missed")]
    assert [seq for seq, _ in got] == stored
    assert [kind for _, kind in got] == ["status", "node.start", "token", "status", "done"]


async def test_a_last_event_the_feed_missed_is_found_after_a_quiet_spell(
    bus: Bus, feeds: RunFeeds, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "LIVE_CHECK_S", 0.2)
    publisher = EventPublisher(bus, "t_quiet")
    await feeds.open_for_new_run("t_quiet")
    reader = asyncio.create_task(collect(feeds, "t_quiet"))
    await publisher.emit(StatusEvent(task_id="t_quiet", status="running"))
    await publisher.flush()
    feed = feeds.feeds["t_quiet"]

    async def read_live() -> bool:
        return feed.last_seq > 0

    await eventually(read_live)
    # The live subscription goes away, as a message lost to a reconnect would: no later event
    # will come to show the gap, only the stream holds the end.
    live = [sub for sub in bus.nc._subs.values() if sub.subject == bus.subjects.live("t_quiet")]
    assert len(live) == 1
    await live[0].unsubscribe()
    await publisher.emit(StatusEvent(task_id="t_quiet", status="done"))
    await publisher.emit(DoneEvent(task_id="t_quiet", status="done"))
    got = await asyncio.wait_for(reader, 20)
    assert [kind for _, kind in got] == ["status", "status", "done"]


async def test_a_feed_opened_for_a_task_that_was_not_queued_is_let_go(bus: Bus, feeds: RunFeeds) -> None:
    subscriptions = len(bus.nc._subs)
    await feeds.open_for_new_run("t_unqueued")
    assert len(bus.nc._subs) == subscriptions + 1
    feeds.release("t_unqueued")
    assert "t_unqueued" not in feeds.feeds

    async def let_go() -> bool:  # the live subscription ends with the feed
        return len(bus.nc._subs) == subscriptions

    await eventually(let_go)


async def test_a_feed_opened_while_the_stream_has_no_leader_reads_it_once_there_is_one(
    bus: Bus, feeds: RunFeeds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating the feed's consumer times out while the events stream (or the meta group) elects
    a leader: the feed asks again, with a consumer config of its own each time (the client writes
    its deliver subject into the one it is given), and its clients get every event — not an
    `event_feed_failed` that ends their streams."""
    publisher = EventPublisher(bus, "t_election")
    await publisher.emit(StatusEvent(task_id="t_election", status="running"))
    await publisher.emit(TokenEvent(task_id="t_election", node_id="ans", text="x"))
    await publisher.emit(DoneEvent(task_id="t_election", status="done"))
    await publisher.flush()
    reader = reader_js(bus)  # readers make their consumers with this context (2 s requests)
    real = reader.subscribe
    configs: list[object] = []

    async def no_leader_yet(*args: object, **kwargs: object) -> object:
        configs.append(kwargs["config"])
        if len(configs) <= 2:
            raise nats.errors.TimeoutError  # what a consumer create gets while there is no leader
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader, "subscribe", no_leader_yet)
    got = await asyncio.wait_for(collect(feeds, "t_election"), 20)
    assert [kind for _, kind in got] == ["status", "token", "done"]
    assert len(configs) == 3 and len({id(c) for c in configs}) == 3


async def test_a_feed_whose_consumer_died_with_its_node_reads_on_from_a_new_one(
    bus: Bus, feeds: RunFeeds
) -> None:
    """A feed's consumer (one replica, on one node) goes when that node dies. The server beats
    to an idle consumer every 0.5 s and the client replaces one after two missed beats, so the
    feed reads on from where it was within about a second, and its clients miss nothing."""
    publisher = EventPublisher(bus, "t_node")
    await publisher.emit(StatusEvent(task_id="t_node", status="running"))
    await publisher.flush()
    before = {c.name for c in await bus.js.consumers_info(bus.names.events_stream)}
    reader = asyncio.create_task(collect(feeds, "t_node"))

    async def its_consumer() -> str | None:
        mine = [c for c in await bus.js.consumers_info(bus.names.events_stream) if c.name not in before]
        return mine[0].name if len(mine) == 1 and feeds.feeds["t_node"].last_seq else None

    name = await eventually(its_consumer)
    info = await bus.js.consumer_info(bus.names.events_stream, name)
    assert info.config.idle_heartbeat == 0.5
    await bus.js.delete_consumer(bus.names.events_stream, name)  # as its node's death takes it
    await publisher.emit(TokenEvent(task_id="t_node", node_id="ans", text="x"))
    await publisher.emit(DoneEvent(task_id="t_node", status="done"))
    got = await asyncio.wait_for(reader, 30)
    assert [kind for _, kind in got] == ["status", "token", "done"]
