"""The retry loop every JetStream write and declaration goes through: what is retried, for how
long, what is logged, and the clear error at the end."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace

import nats.errors
import nats.js.errors
import pytest

from shared.bus import retry as retry_module
from shared.bus.retry import (
    FIRST_CONNECTION,
    BusDeclareError,
    BusWriteError,
    declarations,
    describe,
    is_settling,
    is_transient,
    settled,
    with_retries,
)
from shared.settings import Settings


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


# -- declarations: what a forming cluster answers is a wait; a refused config is a clear error ------

def _api(code: int, err_code: int, description: str) -> nats.js.errors.APIError:
    kinds = {400: nats.js.errors.BadRequestError, 404: nats.js.errors.NotFoundError,
             500: nats.js.errors.ServerError, 503: nats.js.errors.ServiceUnavailableError}
    return kinds[code](code=code, err_code=err_code, description=description)


FORMING = [
    _api(400, 10005, "no suitable peers for placement"),
    _api(503, 10023, "insufficient resources"),
    _api(503, 10008, "JetStream system temporarily unavailable"),
    _api(500, 10009, "JetStream cluster can not handle request"),
    _api(503, 10004, "incomplete results"),
    _api(500, 10007, "JetStream cluster not assigned to this server"),
    nats.js.errors.ServiceUnavailableError(),  # a 503 status header: no code at all
    nats.errors.TimeoutError(),  # no meta leader yet: the request is not answered
    nats.errors.NoRespondersError(),
]
REFUSED = [
    _api(500, 10074, "replicas > 1 not supported in non-clustered mode"),  # a 500, yet for good
    _api(500, 10052, "stream configuration for replicas is invalid"),
    _api(500, 10047, "insufficient storage resources available"),
    _api(400, 10065, "subjects overlap with an existing stream"),
    _api(400, 10003, "bad request"),
]


@pytest.mark.parametrize("exc", FORMING, ids=lambda e: describe(e))
def test_what_a_forming_cluster_answers_is_a_wait(exc: Exception) -> None:
    assert is_settling(exc) and is_transient(exc)


@pytest.mark.parametrize("exc", [_api(404, 10059, "stream not found"), _api(404, 10014, "consumer not found")],
                         ids=["stream", "consumer"])
def test_not_found_right_after_a_create_is_a_wait_for_a_declaration_only(exc: Exception) -> None:
    # A node that has not applied another service's create yet; a write to a missing stream is not retried.
    assert is_settling(exc) and not is_transient(exc)


@pytest.mark.parametrize("exc", REFUSED, ids=lambda e: describe(e))
def test_a_config_the_server_refuses_is_not_a_wait(exc: Exception) -> None:
    assert not is_settling(exc) and not is_transient(exc)


async def test_a_refused_declaration_is_a_clear_error_at_once_naming_what_and_why() -> None:
    calls = 0

    async def declare() -> None:
        nonlocal calls
        calls += 1
        raise _api(500, 10074, "replicas > 1 not supported in non-clustered mode")

    with pytest.raises(BusDeclareError) as caught:
        await with_retries(declare, what="declaring stream AGENTIX_TASKS (replicas 3)", policy=declarations(60))
    assert calls == 1
    assert caught.value.code == "bus_declare_failed"
    assert str(caught.value) == ("declaring stream AGENTIX_TASKS (replicas 3): refused by the server: "
                                 "replicas > 1 not supported in non-clustered mode (err 10074)")


async def test_a_declaration_waits_with_a_line_and_a_report_per_attempt(caplog: pytest.LogCaptureFixture) -> None:
    answers = [nats.errors.TimeoutError(), _api(400, 10005, "no suitable peers for placement"),
               _api(404, 10059, "stream not found")]
    heard: list[str] = []

    async def declare() -> str:
        if answers:
            raise answers.pop(0)
        return "declared"

    with caplog.at_level(logging.INFO, logger="agentix.bus.retry"):
        assert await with_retries(declare, what="declaring stream S", policy=declarations(60),
                                  on_wait=heard.append) == "declared"
    assert heard == ["declaring stream S: no answer in time (timeout)",
                     "declaring stream S: no suitable peers for placement (err 10005)",
                     "declaring stream S: stream not found (err 10059)"]
    lines = [r.getMessage() for r in caplog.records if r.name == "agentix.bus.retry"]
    assert len(lines) == 3 and all("trying again in" in line and "attempt" in line for line in lines), lines


async def test_a_declaration_that_never_settles_gives_up_after_its_budget_with_the_last_answer() -> None:
    async def declare() -> None:
        raise _api(400, 10005, "no suitable peers for placement")

    with pytest.raises(BusDeclareError) as caught:
        await with_retries(declare, what="declaring stream S (replicas 3)", policy=declarations(0.3))
    assert str(caught.value).startswith("declaring stream S (replicas 3): not done after 0.3 s")
    assert str(caught.value).endswith("last answer: no suitable peers for placement (err 10005)")


def test_the_declaration_budget_comes_from_the_setting_and_zero_is_no_limit() -> None:
    assert declarations(120).retry_for_s == 120
    assert declarations(0).retry_for_s == math.inf
    assert Settings().declare_timeout_s == 120


async def test_the_first_connection_waits_on_an_unreachable_nats_only() -> None:
    attempts = 0

    async def connect() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise ConnectionRefusedError("connect call failed")
        return "connected"

    assert await with_retries(connect, what="waiting for NATS", policy=replace(FIRST_CONNECTION, first_delay_s=0.01)) \
        == "connected"

    async def misconfigured() -> None:
        raise ValueError("not a NATS url")

    with pytest.raises(ValueError):
        await with_retries(misconfigured, what="waiting for NATS", policy=FIRST_CONNECTION)
