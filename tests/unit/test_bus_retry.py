"""The retry loop every JetStream write goes through: what is retried, for how long, and the
clear error at the end."""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors
import pytest

from shared.bus import retry as retry_module
from shared.bus.retry import BusWriteError, is_transient, settled, with_retries


@pytest.mark.parametrize("exc", [
    nats.js.errors.NoStreamResponseError(),
    nats.errors.NoRespondersError(),
    nats.errors.TimeoutError(),
    TimeoutError(),
    nats.errors.ConnectionReconnectingError(),
    nats.js.errors.ServiceUnavailableError(code=503, description="JetStream system temporarily unavailable"),
    nats.js.errors.APIError(code=409, err_code=10158, description="duplicate message id is in process"),
])
def test_an_election_or_a_reconnect_is_transient(exc: Exception) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize("exc", [
    nats.js.errors.KeyWrongLastSequenceError(description="wrong last sequence: 3"),
    nats.js.errors.BadRequestError(code=400, err_code=10071, description="wrong last sequence: 3"),
    nats.js.errors.NotFoundError(code=404, description="stream not found"),
    nats.errors.ConnectionClosedError(),
    ValueError("a bug"),
])
def test_a_refusal_or_a_bug_is_not(exc: Exception) -> None:
    assert not is_transient(exc)


async def test_the_same_write_is_retried_until_it_succeeds() -> None:
    calls: list[int] = []

    async def write() -> str:
        calls.append(len(calls))
        if len(calls) < 4:
            raise nats.js.errors.NoStreamResponseError
        return "stored"

    assert await with_retries(write, what="w") == "stored"
    assert len(calls) == 4


async def test_a_permanent_error_is_raised_at_once() -> None:
    calls = 0

    async def write() -> None:
        nonlocal calls
        calls += 1
        raise nats.js.errors.KeyWrongLastSequenceError(description="wrong last sequence: 1")

    with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):
        await with_retries(write, what="w")
    assert calls == 1


async def test_through_a_long_election_a_write_is_tried_again_at_least_every_250_ms(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The new leader's first write comes at the next try: the backoff must stay short, or work
    resumes up to a whole backoff after the election (1 s, when it doubled up to 1 s)."""
    waits: list[float] = []

    async def recorded(delay: float) -> None:
        waits.append(delay)

    monkeypatch.setattr(retry_module.asyncio, "sleep", recorded)
    tries = 0

    async def write() -> str:
        nonlocal tries
        tries += 1
        if tries <= 40:  # an election: answered at once with "no responders"
            raise nats.js.errors.NoStreamResponseError
        return "stored"

    assert await with_retries(write, what="w") == "stored"
    assert waits[0] == 0.05 and max(waits) == 0.25 and waits[-1] == 0.25


async def test_no_leader_for_the_whole_period_is_a_clear_error() -> None:
    async def write() -> None:
        raise nats.js.errors.NoStreamResponseError

    with pytest.raises(BusWriteError) as caught:
        await with_retries(write, what="event t1:7", retry_for_s=0.3)
    assert caught.value.code == "bus_write_failed"
    assert "event t1:7" in str(caught.value) and "NoStreamResponseError" in str(caught.value)


async def test_a_connection_closed_on_purpose_stops_the_retries() -> None:
    async def write() -> None:
        raise nats.errors.ConnectionReconnectingError

    with pytest.raises(nats.errors.ConnectionReconnectingError):
        await with_retries(write, what="w", closed=lambda: True)


async def test_a_settled_ack_is_its_result_or_its_error_and_a_missing_one_times_out() -> None:
    loop = asyncio.get_running_loop()
    stored, refused, pending, never = (loop.create_future() for _ in range(4))
    stored.set_result("ack")
    refused.set_exception(nats.js.errors.NoStreamResponseError())
    assert await settled(stored) == "ack"  # already in: read at once
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await settled(refused)
    loop.call_soon(pending.set_result, "late ack")
    assert await settled(pending, timeout_s=5) == "late ack"  # still to come: waited for
    with pytest.raises(TimeoutError):
        await settled(never, timeout_s=0.01)
    assert not never.cancelled()  # the timeout gives up on the wait, not on the ack (shielded)
