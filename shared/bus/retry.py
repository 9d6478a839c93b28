"""Every JetStream write rides through a leader election: the one retry loop that every writer
(task and resume publishes, event publishes, checkpoint and KV writes, acks, ingest jobs and
progress) goes through.

A clustered stream with no leader answers "no responders" (or nothing at all) for the few
seconds an election takes; a server restart looks the same from a client. That is not a failure
of the message: the writer retries the *same* message — the same `Nats-Msg-Id`, so a retry of a
write that was stored but whose ack was lost is dropped as a duplicate — with backoff, for as
long as a cluster needs to elect a leader (`RETRY_FOR_S`), then raises `BusWriteError`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors

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

_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    nats.js.errors.NoStreamResponseError,
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


def is_transient(exc: BaseException) -> bool:
    """The write may succeed if tried again once a leader is elected / the client reconnected."""
    if isinstance(exc, nats.js.errors.APIError):
        return (getattr(exc, "code", None) in _TRANSIENT_STATUS
                or getattr(exc, "err_code", None) == _DUPLICATE_IN_PROCESS)
    return isinstance(exc, _TRANSIENT_TYPES)


async def with_retries(
    write: Callable[[], Awaitable[T]],
    *,
    what: str,
    retry_for_s: float = RETRY_FOR_S,
    closed: Callable[[], bool] | None = None,
) -> T:
    """`await write()`, again after each transient failure (exponential backoff from
    FIRST_DELAY_S to MAX_DELAY_S) until it succeeds or `retry_for_s` has passed. `write` must
    send the same message each time (same payload, same msg id): that is what makes a retry of
    a write whose ack was lost harmless. A permanent error (e.g. a failed compare-and-set) is
    raised at once; `closed()` true (the connection is being closed on purpose) stops retrying."""
    deadline = time.monotonic() + retry_for_s
    delay = FIRST_DELAY_S
    attempts = 0
    while True:
        attempts += 1
        try:
            return await write()
        except Exception as exc:
            if not is_transient(exc) or (closed is not None and closed()):
                raise
            if time.monotonic() + delay > deadline:
                raise BusWriteError(
                    f"{what} failed: no JetStream leader answered in {retry_for_s:g}s "
                    f"({attempts} attempts; last error: {type(exc).__name__}: {exc})"
                ) from exc
            if attempts == 1:
                log.info("%s: %s; retrying (a leader election or a reconnect)", what, type(exc).__name__)
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_DELAY_S)


async def settled(future: asyncio.Future[T], timeout_s: float = ACK_TIMEOUT_S) -> T:
    """The result of a pipelined publish's ack future, or TimeoutError (transient) when no ack
    came within `timeout_s`. An ack already in is read at once: `wait_for` would still arm a timer
    and give the loop a turn, once per event of a task when its acks are settled at its end."""
    if future.done():
        return future.result()
    return await asyncio.wait_for(asyncio.shield(future), timeout_s)
