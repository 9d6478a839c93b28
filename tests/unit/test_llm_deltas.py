"""Adaptive coalescing of stream deltas in front of a slow sink."""

from __future__ import annotations

import asyncio

import pytest

from services.dispatcher.llm.api import Delta
from services.dispatcher.llm.deltas import DeltaStream


async def test_a_busy_sink_gets_merged_deltas_in_order() -> None:
    got: list[Delta] = []
    gate = asyncio.Event()

    async def slow_sink(delta: Delta) -> None:
        await gate.wait()
        got.append(delta)

    stream = DeltaStream(slow_sink)
    await stream.push(Delta("thinking", "hm", "m"))
    await asyncio.sleep(0)  # the sink took "hm" and is now busy
    for piece in ["a", "b", "c"]:
        await stream.push(Delta("token", piece, "m"))
    await stream.push(Delta("thinking", "!", "m"))
    await stream.push(Delta("token", "d", "m"))
    gate.set()
    await stream.flush()
    assert [(d.kind, d.text) for d in got] == [("thinking", "hm"), ("token", "abc"), ("thinking", "!"), ("token", "d")]


async def test_an_idle_sink_gets_every_delta_and_failures_surface() -> None:
    got: list[str] = []

    async def sink(delta: Delta) -> None:
        if delta.text == "boom":
            raise RuntimeError("publish failed")
        got.append(delta.text)

    stream = DeltaStream(sink)
    for piece in ["x", "y"]:
        await stream.push(Delta("token", piece))
        await asyncio.sleep(0)
    await stream.flush()
    assert got == ["x", "y"]
    await stream.push(Delta("token", "boom"))
    with pytest.raises(RuntimeError, match="publish failed"):
        await stream.flush()


async def test_without_coalescing_the_sink_is_awaited_inline() -> None:
    got: list[str] = []

    async def sink(delta: Delta) -> None:
        got.append(delta.text)

    stream = DeltaStream(sink, coalesce=False)
    await stream.push(Delta("token", "a"))
    assert got == ["a"]


async def test_within_the_interval_deltas_wait_and_merge_and_flush_sends_them_at_once() -> None:
    got: list[str] = []
    took = asyncio.Event()

    async def sink(delta: Delta) -> None:
        got.append(delta.text)
        took.set()

    stream = DeltaStream(sink, interval_s=3600.0)
    await stream.push(Delta("token", "a", "m"))
    await took.wait()  # the first delta of a quiet stream goes out at once
    for piece in ["b", "c"]:
        await stream.push(Delta("token", piece, "m"))
    for _ in range(5):  # loop turns in which a free sink would have been handed "b"
        await asyncio.sleep(0)
    assert got == ["a"]
    await stream.flush()  # does not wait out the interval
    assert got == ["a", "bc"]


async def test_read_wait_says_how_long_a_pushed_delta_would_be_held() -> None:
    """A producer reading in rounds (the model's stream) need not read before then."""
    got: list[str] = []

    async def sink(delta: Delta) -> None:
        got.append(delta.text)

    stream = DeltaStream(sink, interval_s=3600.0)
    assert stream.read_wait() == 0.0  # a quiet stream sends the next delta at once
    await stream.push(Delta("token", "a", "m"))
    # "a" goes now; what comes next waits for a tick at least half an interval away.
    assert 1800.0 <= stream.read_wait() <= 5400.0
    await asyncio.sleep(0)
    assert got == ["a"] and 1800.0 <= stream.read_wait() <= 5400.0
    await stream.flush()
    assert stream.read_wait() == 0.0  # the call's end: nothing is held any more
    assert DeltaStream(sink).read_wait() == 0.0  # no interval, no wait


async def test_the_streams_of_a_process_deliver_on_the_same_ticks() -> None:
    """So the pieces due at a tick are published together, not each on its own time."""
    loop = asyncio.get_running_loop()

    async def sink(delta: Delta) -> None:
        pass

    first, second = DeltaStream(sink, interval_s=3600.0), DeltaStream(sink, interval_s=3600.0)
    await first.push(Delta("token", "a", "m"))
    await asyncio.sleep(0)
    await second.push(Delta("token", "b", "m"))
    due = [loop.time() + stream.read_wait() for stream in (first, second)]
    assert due[0] == pytest.approx(due[1], abs=1e-3)
    assert due[0] / 3600.0 == pytest.approx(round(due[0] / 3600.0), abs=1e-6)  # a whole number of intervals
    for stream in (first, second):
        await stream.flush()
