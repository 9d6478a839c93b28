"""SSE fan-out: the gateway reads a live task's events once (one JetStream consumer per watched
task, asked of the server) and every client of the task — early, late, resuming mid-stream —
gets exactly the events after its resume point, in stream order; a client that leaves does
not disturb the others; a client older than what the feed keeps reads on by itself and
rejoins."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator

import httpx
import pytest

from services.gateway.embedded import EmbeddedGateway
from services.gateway.runs.feed import RunFeeds
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events
from shared.contract.events import DoneEvent, StatusEvent, TokenEvent
from tests.integration.test_gateway_sse import Frame, frames, new_task
from tests.support.wait import eventually

CLIENTS = 40


@pytest.fixture
async def client(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    limits = httpx.Limits(max_connections=CLIENTS * 4, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=30, limits=limits) as c:
        yield c


class Watcher:
    """One SSE client reading a task's stream until `done` (or until `leave`)."""

    def __init__(self, client: httpx.AsyncClient, task_id: str, endpoint: str = "events",
                 last_event_id: int | None = None) -> None:  # fmt: skip
        self.seen: list[Frame] = []
        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        self.task = asyncio.create_task(self._read(client, f"/api/v1/tasks/{task_id}/{endpoint}", headers))

    async def _read(self, client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
        async with client.stream("GET", path, headers=headers) as resp:
            assert resp.status_code == 200
            async for f in frames(resp):
                self.seen.append(f)
                if f.event == "done":
                    return

    async def has(self, count: int) -> bool:
        if self.task.done():
            self.task.result()  # a failed reader fails the wait at once
        return len(self.seen) >= count

    async def leave(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    def ids(self) -> list[int | None]:
        return [f.id for f in self.seen if f.event != "heartbeat"]


async def streaming(watchers: list[Watcher]) -> None:
    for w in watchers:
        await eventually(functools.partial(w.has, 1))


def bus_of(gw: EmbeddedGateway) -> Bus:
    assert gw.app is not None
    return gw.app.state.bus


def feeds_of(gw: EmbeddedGateway) -> RunFeeds:
    assert gw.app is not None
    return gw.app.state.run_feeds


async def consumers_of(bus: Bus, task_id: str, read: bool = False) -> int:
    """The server's count of consumers on the events stream that read this task (`read`: only
    those a subscriber is on — one nobody reads any more is deleted by the server ~5 s later)."""
    infos = await bus.js.consumers_info(bus.names.events_stream)
    subjects = [[c.config.filter_subject or "", *(c.config.filter_subjects or [])] for c in infos]
    return sum(1 for c, of in zip(infos, subjects, strict=True)
               if any(task_id in s for s in of) and (c.push_bound or not read))


async def log_ids(bus: Bus, task_id: str, after: int = 0) -> list[int]:
    """The stream sequences of the task's events after `after`, read straight from JetStream."""
    return [seq async for seq, _ in read_events(bus, task_id, after_seq=after, follow=False)]


async def tokens(pub: EventPublisher, task_id: str, count: int, start: int = 0, size: int = 0) -> None:
    for i in range(start, start + count):
        await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text=f"t{i:04d} " + "x" * size))
    await pub.flush()


async def finish(pub: EventPublisher, task_id: str) -> None:
    await pub.emit(StatusEvent(task_id=task_id, status="done"))
    await pub.emit(DoneEvent(task_id=task_id, status="done", output={"out": "ok"}))
    await pub.flush()


async def test_many_clients_of_one_task_share_one_consumer_and_all_get_every_event_in_order(
    gw: EmbeddedGateway, client: httpx.AsyncClient
) -> None:
    bus = bus_of(gw)
    task_id = await new_task(client)
    pub = EventPublisher(bus, task_id)
    await pub.emit(StatusEvent(task_id=task_id, status="running"))
    await pub.flush()
    watchers = [Watcher(client, task_id, endpoint=("events", "stream", "exec")[i % 3]) for i in range(CLIENTS)]
    await streaming(watchers)  # every client got the first event
    assert await consumers_of(bus, task_id) == 1
    # Another watched task adds its own one consumer, whatever the clients.
    other = await new_task(client)
    other_pub = EventPublisher(bus, other)
    await other_pub.emit(StatusEvent(task_id=other, status="running"))
    await other_pub.flush()
    others = [Watcher(client, other) for _ in range(5)]
    await streaming(others)
    assert (await consumers_of(bus, task_id), await consumers_of(bus, other)) == (1, 1)

    await tokens(pub, task_id, 300)
    await finish(pub, task_id)
    await asyncio.gather(*(w.task for w in watchers))
    everything = [seq async for seq, _ in read_events(bus, task_id, follow=False)]
    by_channel = {
        "events": everything,
        "stream": [s async for s, _ in read_events(bus, task_id, channels=("token", "status"), follow=False)],
        "exec": [s async for s, _ in read_events(bus, task_id, channels=("exec", "status"), follow=False)],
    }
    assert len(everything) == 303
    for i, w in enumerate(watchers):
        assert w.ids() == by_channel[("events", "stream", "exec")[i % 3]], f"client {i}"
    texts = "".join(f.data["text"] for f in watchers[0].seen if f.event == "token")
    assert texts == "".join(f"t{i:04d} " for i in range(300))

    await finish(other_pub, other)
    await asyncio.gather(*(w.task for w in others))
    other_ids = await log_ids(bus, other)
    assert all(w.ids() == other_ids for w in others)
    await eventually(lambda: _no_feeds(gw))  # the last client of each gone: its feed and consumer too
    await eventually(lambda: _read_by(bus, task_id, 0))


async def _no_feeds(gw: EmbeddedGateway) -> bool:
    return not feeds_of(gw).feeds and not feeds_of(gw)._stopping


async def test_a_late_joiner_gets_exactly_the_rest_and_a_leaver_disturbs_no_one(
    gw: EmbeddedGateway, client: httpx.AsyncClient
) -> None:
    bus = bus_of(gw)
    task_id = await new_task(client)
    pub = EventPublisher(bus, task_id)
    await pub.emit(StatusEvent(task_id=task_id, status="running"))
    await tokens(pub, task_id, 50)
    stayer, leaver = Watcher(client, task_id), Watcher(client, task_id)
    await eventually(lambda: stayer.has(51))
    await eventually(lambda: leaver.has(20))
    await leaver.leave()

    so_far = [f.id for f in stayer.seen if f.id is not None]
    middle = so_far[25]
    late = Watcher(client, task_id, last_event_id=middle)  # resumes mid-stream, from the feed
    from_start = Watcher(client, task_id)  # joins late without a resume point
    await eventually(lambda: late.has(len(so_far) - 26))
    await eventually(lambda: from_start.has(len(so_far)))
    assert await consumers_of(bus, task_id) == 1  # three clients, one consumer
    await tokens(pub, task_id, 50, start=50)
    await finish(pub, task_id)
    await asyncio.gather(stayer.task, late.task, from_start.task)

    everything = await log_ids(bus, task_id)
    assert stayer.ids() == everything and from_start.ids() == everything
    assert late.ids() == [s for s in everything if s > middle]
    assert 20 <= len(leaver.ids()) < len(everything) and leaver.ids() == everything[:len(leaver.ids())]


async def test_a_client_older_than_what_the_feed_keeps_reads_on_by_itself_and_rejoins(
    gw: EmbeddedGateway, client: httpx.AsyncClient
) -> None:
    bus = bus_of(gw)
    feeds = feeds_of(gw)
    feeds.max_bytes = 200_000  # the feed keeps the newest ~60 of these events
    task_id = await new_task(client)
    pub = EventPublisher(bus, task_id)
    await pub.emit(StatusEvent(task_id=task_id, status="running"))
    await pub.flush()
    anchor = Watcher(client, task_id)  # keeps the feed open
    await eventually(lambda: anchor.has(1))
    await tokens(pub, task_id, 400, size=2_000)
    await eventually(lambda: anchor.has(401))
    feed = feeds.feeds[task_id]
    assert feed.dropped_seq > 0 and len(feed.entries) < 200  # the oldest events are gone from memory

    late = Watcher(client, task_id)  # needs them all: reads the stream itself from the start...
    await eventually(lambda: late.has(401))
    await eventually(lambda: _read_by(bus, task_id, 1))  # ...then rejoins the feed: one consumer read again
    await tokens(pub, task_id, 100, start=400, size=2_000)
    await finish(pub, task_id)
    await asyncio.gather(anchor.task, late.task)
    everything = await log_ids(bus, task_id)
    assert len(everything) == 503
    assert late.ids() == everything and anchor.ids() == everything


async def _read_by(bus: Bus, task_id: str, count: int) -> bool:
    return await consumers_of(bus, task_id, read=True) == count


async def test_a_finished_task_is_replayed_by_its_own_read_and_shutdown_ends_live_streams(
    gw: EmbeddedGateway, client: httpx.AsyncClient
) -> None:
    bus = bus_of(gw)
    done_task = await new_task(client)
    pub = EventPublisher(bus, done_task)
    await pub.emit(StatusEvent(task_id=done_task, status="running"))
    await finish(pub, done_task)

    async def terminal() -> bool:
        return (await client.get(f"/api/v1/tasks/{done_task}")).json()["status"] == "done"

    await eventually(terminal)
    replay = Watcher(client, done_task)
    await replay.task
    assert replay.ids() == await log_ids(bus, done_task) and done_task not in feeds_of(gw).feeds

    live = await new_task(client)
    live_pub = EventPublisher(bus, live)
    await live_pub.emit(StatusEvent(task_id=live, status="running"))
    await live_pub.flush()
    watchers = [Watcher(client, live) for _ in range(3)]
    await streaming(watchers)
    await feeds_of(gw).close()  # what the gateway's drain does
    await asyncio.gather(*(w.task for w in watchers))  # the streams end
    await eventually(lambda: _read_by(bus, live, 0))
    assert not feeds_of(gw).feeds
