"""Schedules on JetStream message schedules (real nats-server): the server fires a definition
on its own, once per period, and the fires come to the gateways' one durable consumer."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nats.js.errors import NotFoundError

from services.gateway.triggers.catch_up import judge, parse_next
from services.gateway.triggers.fires import Fire, put_schedule, read_fire, remove_schedule
from services.gateway.triggers.timing import Timing
from shared.bus import Bus
from tests.conftest import make_settings
from tests.support.nats_server import NatsServer


async def _fires(bus: Bus, want: int, timeout_s: float) -> list[Fire]:
    sub = await bus.js.pull_subscribe_bind(bus.names.triggers_consumer, stream=bus.names.schedules_stream)
    got: list[Fire] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while len(got) < want and loop.time() < deadline:
        try:
            msgs = await sub.fetch(want - len(got), timeout=0.5)
        except TimeoutError:
            continue
        for msg in msgs:
            got.append(read_fire(msg))
            await msg.ack()
    await sub.unsubscribe()
    return got


async def test_every_second_fires_once_per_second_each_with_its_own_id(bus: Bus) -> None:
    await bus.declare()
    await put_schedule(bus, "s1", Timing(every="1s"), b'{"x": 1}')
    fires = await _fires(bus, 5, timeout_s=15)
    assert len(fires) == 5
    assert {f.schedule_id for f in fires} == {"s1"}
    assert len({f.fire_id for f in fires}) == 5  # no fire delivered twice
    assert all(f.payload == b'{"x": 1}' for f in fires)
    gaps = [(b.fired_at - a.fired_at).total_seconds() for a, b in itertools.pairwise(fires)]
    assert all(0.5 <= g <= 1.5 for g in gaps), gaps
    assert all(f.next_at for f in fires)


async def test_cron_in_a_time_zone_names_its_next_fire_in_that_zone(bus: Bus) -> None:
    await bus.declare()
    await put_schedule(bus, "s2", Timing(cron="* * * * * *", timezone="Asia/Kolkata"))
    (fire,) = await _fires(bus, 1, timeout_s=10)
    assert fire.next_at is not None and fire.next_at.endswith("+05:30")
    assert datetime.fromisoformat(fire.next_at) - fire.fired_at <= timedelta(seconds=2)


async def test_removed_schedule_fires_no_more(bus: Bus) -> None:
    await bus.declare()
    await put_schedule(bus, "s3", Timing(every="1s"))
    assert len(await _fires(bus, 1, timeout_s=10)) == 1
    await remove_schedule(bus, "s3")
    try:
        await bus.js.get_last_msg(bus.names.schedules_stream, bus.subjects.schedule("s3"))
        raise AssertionError("definition still stored")
    except NotFoundError:
        pass
    # drain a fire that may have been published between the last fetch and the purge
    await _fires(bus, 1, timeout_s=1.5)
    assert await _fires(bus, 1, timeout_s=3) == []


async def test_at_fires_once(bus: Bus) -> None:
    await bus.declare()
    when = datetime.now().astimezone() + timedelta(seconds=1)
    await put_schedule(bus, "s4", Timing(at=when))
    fires = await _fires(bus, 2, timeout_s=5)
    assert len(fires) == 1


async def test_after_a_full_stop_a_missed_schedule_fires_once_not_once_per_missed_period(tmp_path: Path) -> None:
    """What `catch_up` builds on: the server holds the definition through a stop of the whole
    cluster and, started again, fires it once at once; the periods it missed are not replayed."""
    server = NatsServer(store_dir=tmp_path / "nats").start()
    try:
        settings = make_settings(server.url, tmp_path / "data")
        bus = await Bus.connect(settings, name="test")
        await bus.declare()
        await put_schedule(bus, "s5", Timing(every="1s"))
        seen = await _fires(bus, 1, timeout_s=10)
        assert len(seen) == 1
        await bus.close()
        stopped_at = datetime.now(UTC)
        server.stop()
        await asyncio.sleep(4)  # the whole cluster is down for four periods
        server.start()
        bus = await Bus.connect(settings, name="test")
        # a fire published between the first fetch and the stop may come first: not counted
        seen += await _fires(bus, 4, timeout_s=15)
        after = [f for f in seen if f.fired_at > stopped_at][:3]
        await bus.close()
    finally:
        server.cleanup()
    assert len(after) == 3
    assert (after[0].fired_at - stopped_at).total_seconds() >= 4
    # one fire for the missed periods, then the schedule's own pace: no burst of four
    assert (after[1].fired_at - after[0].fired_at).total_seconds() >= 0.5
    assert (after[2].fired_at - after[1].fired_at).total_seconds() >= 0.5
    # the made-up fire is known by the time its predecessor named: skipped or run by `catch_up`
    last_before = [f for f in seen if f.fired_at <= stopped_at][-1]
    expected = parse_next(last_before.next_at)
    tolerance = timedelta(seconds=2)
    skipped = judge(after[0].fired_at, expected, "skip", tolerance)
    assert not skipped.run and skipped.late
    assert judge(after[0].fired_at, expected, "once", tolerance).run
    # and the fires after it are on time again
    assert judge(after[1].fired_at, parse_next(after[0].next_at), "skip", tolerance).run
