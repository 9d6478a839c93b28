"""The one retry loop of the bus: every JetStream write rides through a leader election, every
declaration through a cluster that is still forming, and a service's first connection waits for
NATS. Each is a `RetryPolicy` run by `with_retries`.

**Writes** (`WRITES`: task and resume publishes, event publishes, checkpoint and KV writes,
acks, ingest jobs and progress). A clustered stream with no leader answers "no responders" (or
nothing at all) for the few seconds an election takes; a server restart looks the same from a
client. That is not a failure of the message: the writer retries the *same* message — the same
`Nats-Msg-Id`, so a retry of a write that was stored but whose ack was lost is dropped as a
duplicate — with backoff, for as long as a cluster needs to elect a leader (`RETRY_FOR_S`), then
raises `BusWriteError`.

**Declarations** (`declarations(budget_s)`: streams, consumers, KV buckets and object stores,
`streams.py`). A cluster whose nodes have just started answers JetStream requests late or not at
all until its meta leader is elected, refuses a replicated stream with "no suitable peers for
placement" until enough peers have joined, and answers "stream not found" on a node that has
not yet applied a stream another service created a moment before. Each is waited out with a log
line per attempt, for `AGENTIX_DECLARE_TIMEOUT_S`; a refusal no wait can change (a config the
server rejects) is raised at once as `BusDeclareError`, naming what was declared and why.

**The first connection** (`FIRST_CONNECTION`): a service started before NATS answers waits for
it with no upper bound, a log line per attempt (`shared.bus.client.Bus.connect_waiting`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import nats.errors
import nats.js.errors

from shared.backoff import Backoff
from shared.errors import AgentixError

log = logging.getLogger("agentix.bus.retry")
T = TypeVar("T")

# How long a write keeps trying: an election takes a few seconds, a restarted server a few more.
RETRY_FOR_S = 30.0
FIRST_DELAY_S = 0.05
# A write retried through an election goes through on the first try after the new leader is
# elected, so this is how late work resumes after it: up to 1 s (0.4 s on average) with 1 s,
# measured with 12 tasks streaming (bench/leader_kill.py). During an election a try is answered
# at once ("no responders"): four of them a second per write are cheap.
MAX_DELAY_S = 0.25
# A pub ack that never comes (the leader died holding it) is given up on after this long, then
# the write is retried (the future itself fails only after `pipelined.FORGET_S`).
ACK_TIMEOUT_S = 2.0
# The JetStream API codes that mean "no leader / not ready yet", not "your request is wrong".
_TRANSIENT_STATUS = {408, 500, 503, 504}
# "duplicate message id is in process": our earlier try of this very message is still being
# stored (proposed, not yet committed); asking again shortly answers with its outcome.
_DUPLICATE_IN_PROCESS = 10158
# What a cluster that is forming (or electing its meta leader) answers, and what passes by itself
# once its peers have joined: "no suitable peers for placement" (a 400), "insufficient
# resources", "JetStream system temporarily unavailable", "cluster can not handle request" (no
# meta leader), "incomplete results", "cluster not assigned to this server".
SETTLING_CODES = {10005, 10023, 10008, 10009, 10004, 10007}
# Refusals of a config that no wait changes, though some come as a 500: an invalid stream config,
# "replicas > 1 not supported in non-clustered mode", storage or memory the server cannot
# reserve, subjects that overlap another stream's, replicas that cannot be updated.
REFUSED_CODES = {10052, 10074, 10047, 10028, 10065, 10061}
# "stream not found" / "consumer not found": during a declaration, a node that has not yet
# applied what another service created a moment before (a write never waits on these).
_NOT_YET_VISIBLE = {10059, 10014}

_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,  # a 503 status header carries no code
    nats.errors.NoRespondersError,
    nats.errors.TimeoutError,
    TimeoutError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.FlushTimeoutError,
)


class BusWriteError(AgentixError, RuntimeError):
    """A JetStream write still failed after `RETRY_FOR_S` of retries: the cluster could not
    elect a leader (or was unreachable) for that long."""

    code = "bus_write_failed"
    http_status = 503
    retryable = True  # a later write finds the leader elected, or the server back


class BusDeclareError(AgentixError, RuntimeError):
    """A stream, consumer or bucket could not be declared: the server refused its config, or the
    cluster did not accept it within the declaration budget. The message names it and why."""

    code = "bus_declare_failed"
    http_status = 503


def is_transient(exc: BaseException) -> bool:
    """The write may succeed if tried again once a leader is elected / the client reconnected."""
    if isinstance(exc, nats.js.errors.APIError):
        err_code = getattr(exc, "err_code", None)
        if err_code in REFUSED_CODES:
            return False
        if err_code == _DUPLICATE_IN_PROCESS or err_code in SETTLING_CODES:
            return True
        if getattr(exc, "code", None) in _TRANSIENT_STATUS:
            return True
    return isinstance(exc, _TRANSIENT_TYPES)


def is_settling(exc: BaseException) -> bool:
    """A declaration may succeed if tried again: what `is_transient` says, or a stream or
    consumer that a node does not know yet right after another service created it."""
    if isinstance(exc, nats.js.errors.NotFoundError) and getattr(exc, "err_code", None) in _NOT_YET_VISIBLE:
        return True
    return is_transient(exc)


def describe(exc: BaseException) -> str:
    """What the server (or the client) said, for a log line or an error message."""
    if isinstance(exc, AgentixError):  # says it all
        return str(exc)
    if isinstance(exc, nats.js.errors.APIError):
        said = exc.description or type(exc).__name__
        return f"{said} (err {exc.err_code})" if exc.err_code else said
    if isinstance(exc, nats.errors.TimeoutError | TimeoutError):
        return "no answer in time (timeout)"
    if isinstance(exc, nats.errors.NoRespondersError | nats.js.errors.NoStreamResponseError):
        return "no responders"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _write_failed(what: str, retry_for_s: float, attempts: int, exc: BaseException) -> Exception:
    return BusWriteError(
        f"{what} failed: no JetStream leader answered in {retry_for_s:g}s "
        f"({attempts} attempts; last error: {type(exc).__name__}: {exc})"
    )


def _declare_failed(what: str, retry_for_s: float, attempts: int, exc: BaseException) -> Exception:
    return BusDeclareError(f"{what}: not done after {retry_for_s:g} s ({attempts} attempts); "
                           f"last answer: {describe(exc)}", retryable=True)  # the cluster may form yet


def _declare_refused(what: str, exc: BaseException) -> Exception:
    return BusDeclareError(f"{what}: refused by the server: {describe(exc)}")


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures of one kind of call are waits, for how long (`retry_for_s`; infinite: no
    limit) and how often (`backoff`: `first_delay_s` doubling to `max_delay_s`), and what is
    logged and raised.

    `log_each_at`: the level of a line per attempt (a wait an operator should see while it lasts),
    or None for one INFO line at the first (a write rides through an election quietly).
    `refused`: turns an error that is not a wait into the one raised (None: raised as it is)."""

    retry_for_s: float
    first_delay_s: float
    max_delay_s: float
    waits: Callable[[BaseException], bool]
    gave_up: Callable[[str, float, int, BaseException], Exception]
    log_each_at: int | None = None
    refused: Callable[[str, BaseException], Exception] | None = None

    def backoff(self, retry_for_s: float) -> Backoff:
        return Backoff(self.first_delay_s, self.max_delay_s, within_s=retry_for_s)


WRITES = RetryPolicy(RETRY_FOR_S, FIRST_DELAY_S, MAX_DELAY_S, is_transient, _write_failed)
# Between two attempts at reaching NATS (each bounded by `nats_connect_timeout_s`).
FIRST_CONNECTION = RetryPolicy(math.inf, 0.5, 5.0, lambda exc: isinstance(exc, ConnectionError),
                               _write_failed, log_each_at=logging.WARNING)


def declarations(budget_s: float) -> RetryPolicy:
    """The policy of declarations: waits through a forming cluster for `budget_s` (0: no limit)."""
    return RetryPolicy(budget_s if budget_s > 0 else math.inf, 0.1, 2.0, is_settling, _declare_failed,
                       log_each_at=logging.INFO, refused=_declare_refused)


Waiting = Callable[[str], None]  # told what a wait is for, at each attempt (a start state)


async def with_retries(
    write: Callable[[], Awaitable[T]],
    *,
    what: str,
    retry_for_s: float | None = None,
    closed: Callable[[], bool] | None = None,
    policy: RetryPolicy = WRITES,
    on_wait: Waiting | None = None,
) -> T:
    """`await write()`, again after each failure `policy` says is a wait (exponential backoff)
    until it succeeds or `retry_for_s` (default: the policy's) has passed. A write must send the
    same message each time (same payload, same msg id): that is what makes a retry of a write
    whose ack was lost harmless. An error that is not a wait (e.g. a failed compare-and-set) is
    raised at once; `closed()` true (the connection is being closed on purpose) stops retrying.
    `on_wait(reason)` hears each wait (`what: reason`)."""
    budget = policy.retry_for_s if retry_for_s is None else retry_for_s
    retries = policy.backoff(budget).start()
    while True:
        try:
            return await write()
        except Exception as exc:
            if not policy.waits(exc) or (closed is not None and closed()):
                if policy.refused is not None and not (closed is not None and closed()):
                    raise policy.refused(what, exc) from exc
                raise
            delay = retries.next_wait()
            attempts = retries.failures
            if delay is None:
                raise policy.gave_up(what, budget, attempts, exc) from exc
            reason = describe(exc)
            if on_wait is not None:
                on_wait(f"{what}: {reason}")
            if policy.log_each_at is not None:
                log.log(policy.log_each_at, "%s: %s; trying again in %.1f s (attempt %d, %.0f s so far)",
                        what, reason, delay, attempts, retries.elapsed_s)
            elif attempts == 1:
                log.info("%s: %s; retrying (a leader election or a reconnect)", what, type(exc).__name__)
        await asyncio.sleep(delay)


async def settled(future: asyncio.Future[T], timeout_s: float = ACK_TIMEOUT_S) -> T:
    """The result of a pipelined publish's ack future, or TimeoutError (transient) when no ack
    came within `timeout_s`. An ack already in is read at once: `wait_for` would still arm a timer
    and give the loop a turn, once per event of a task when its acks are settled at its end."""
    if future.done():
        return future.result()
    return await asyncio.wait_for(asyncio.shield(future), timeout_s)
