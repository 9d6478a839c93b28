"""Pipelined JetStream publishes against a real nats-server: each future resolves with its own
ack, a duplicate is flagged, and every kind of failure reaches the future instead of leaving
it pending."""

from __future__ import annotations

import asyncio

import pytest
from nats.js.errors import APIError, NoStreamResponseError

from shared.bus import Bus, pipelined
from shared.bus.pipelined import pipeline_for
from shared.bus.retry import is_transient


async def test_each_publish_gets_its_own_ack_and_a_repeated_id_is_a_duplicate(bus: Bus) -> None:
    pipe = pipeline_for(bus.nc)
    assert pipeline_for(bus.nc) is pipe  # one per connection
    subject = bus.subjects.events("t-pipe", "status")
    futures = [await pipe.publish(subject, f'{{"n":{i}}}'.encode(), {"Nats-Msg-Id": f"t-pipe:{i}"})
               for i in range(1, 41)]
    acks = [await asyncio.wait_for(f, 5) for f in futures]
    assert [a.stream for a in acks] == [bus.names.events_stream] * 40
    assert [a.seq for a in acks] == sorted({a.seq for a in acks})  # stored in sending order
    assert not any(a.duplicate for a in acks)
    again = await asyncio.wait_for(await pipe.publish(subject, b'{"n":7}', {"Nats-Msg-Id": "t-pipe:7"}), 5)
    assert again.duplicate and again.seq == acks[6].seq
    stored = await bus.js.get_last_msg(bus.names.events_stream, subject)
    assert stored.data == b'{"n":40}'


async def test_no_stream_is_no_responders_and_a_refusal_is_the_streams_error(bus: Bus) -> None:
    pipe = pipeline_for(bus.nc)
    nobody = await pipe.publish("agentix-nowhere.x", b"{}", {"Nats-Msg-Id": "a"})
    with pytest.raises(NoStreamResponseError):
        await asyncio.wait_for(nobody, 5)
    assert is_transient(nobody.exception())  # retried like an election
    wrong = await pipe.publish(bus.subjects.events("t-pipe2", "status"), b"{}",
                               {"Nats-Msg-Id": "b", "Nats-Expected-Stream": "NOT_THIS_ONE"})
    with pytest.raises(APIError) as refused:
        await asyncio.wait_for(wrong, 5)  # set on the future, not a wait for the ack timeout
    assert refused.value.code == 400 and not is_transient(refused.value)


async def test_an_ack_that_never_comes_fails_once_it_is_old(bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = pipeline_for(bus.nc)
    silent = await bus.nc.subscribe("agentix-silent.x")  # takes the message, never answers
    try:
        monkeypatch.setattr(pipelined, "FORGET_S", 0.05)
        lost = await pipe.publish("agentix-silent.x", b"{}", {"Nats-Msg-Id": "c"})
        await asyncio.sleep(0.1)
        assert not lost.done()  # nothing looks at it until the next publish
        fresh = await pipe.publish(bus.subjects.events("t-pipe3", "status"), b"{}", {"Nats-Msg-Id": "d"})
        assert lost.done() and isinstance(lost.exception(), TimeoutError)
        assert is_transient(lost.exception())
        assert (await asyncio.wait_for(fresh, 5)).seq > 0
    finally:
        await silent.unsubscribe()
