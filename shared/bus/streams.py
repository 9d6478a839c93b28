"""One idempotent declaration of every stream, consumer, KV bucket and object store (BUS.md).
Whichever service starts first creates them; the others find them in place.

Every declaration goes through the retry loop's declaration policy (`retry.declarations`): on a
cluster that is still forming — no meta leader yet, too few peers for the replicas, a stream
that another service created a moment before and this node does not know yet — it waits, with a
log line per attempt, for up to `declare_timeout_s`. A config the server refuses is a
`BusDeclareError` naming the stream and the server's reason. A stream or consumer that exists
with a config the server will not change is used as it is, with a warning.

It takes the NATS connection and the settings, not a `Bus`, so that `client.py` (whose
`Bus.declare` calls it) and this module do not import each other."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RePublish,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError

from shared.bus.names import Names, Subjects, names_for, subjects_for
from shared.bus.retry import RETRY_FOR_S, Waiting, declarations, describe, is_settling, with_retries
from shared.settings import CommonSettings

log = logging.getLogger("agentix.bus.streams")

CHECKPOINT_TTL_S = 30 * 24 * 3600
# An MCP session (its record in `P_mcp_sessions`) lives this long after its last write; the
# notifications of MCP sessions' GET streams can be resumed (`Last-Event-ID`) for this long.
MCP_SESSION_TTL_S = 24 * 3600
MCP_EVENTS_MAX_AGE_S = 3600
SCHEDULE_DEDUPE_WINDOW_S = 120.0
DEAD_LETTER_MAX_AGE_S = 7 * 24 * 3600
EVENTS_DEDUPE_WINDOW_S = 2 * RETRY_FOR_S
# How long one JetStream API request of a declaration waits for its answer: 0.5 s at the first
# attempt, doubling at each next one up to 4 s. A cluster that has just formed drops requests
# unanswered for its first seconds (they are never answered, however long one waits), while one
# that has settled answers in a tenth of a second: asking again soon is what gets the answer
# sooner. Measured here with four clients declaring at once right after the nodes answered
# JetStream-enabled (8 rounds of each, interleaved): the last of them done in 1.4–2.8 s this way,
# 4.3–10.8 s with a fixed 2 s (docs/FAULTS.md). A request that took longer but was applied is
# found in place by the next attempt; a server that is merely slow gets a longer wait each time.
FIRST_REQUEST_TIMEOUT_S = 0.5
MAX_REQUEST_TIMEOUT_S = 4.0
# "stream name already in use with a different configuration": created at the same moment by
# another service (an older or newer version of the config): it exists, and is updated.
_NAME_IN_USE = 10058


@dataclass(frozen=True)
class _Target:
    """What a declaration needs: where to declare, and the deployment's names and settings."""

    nc: Client
    settings: CommonSettings
    names: Names
    subjects: Subjects
    on_wait: Waiting | None = None

    async def declare(self, what: str, attempt: Callable[[JetStreamContext], Awaitable[None]]) -> None:
        """`attempt(js)` until it succeeds, through a forming cluster (`retry.declarations`), each
        time with a JetStream context whose requests wait longer (`FIRST_REQUEST_TIMEOUT_S`)."""
        tries = 0

        async def next_try() -> None:
            nonlocal tries
            timeout = min(FIRST_REQUEST_TIMEOUT_S * 2**tries, MAX_REQUEST_TIMEOUT_S)
            tries += 1
            await attempt(self.nc.jetstream(timeout=timeout))

        await with_retries(next_try, what=f"declaring {what}", policy=declarations(self.settings.declare_timeout_s),
                           on_wait=self.on_wait)


def _kept_as_it_is(what: str, exc: APIError) -> None:
    """An update the server refuses for good: what exists keeps working with its own config."""
    if is_settling(exc):
        raise exc
    log.warning("%s exists with a different config that cannot be updated: %s", what, describe(exc))


async def _ensure_stream(target: _Target, config: StreamConfig) -> None:
    name = config.name
    assert name is not None  # every stream Agentix declares is named

    async def attempt(js: JetStreamContext) -> None:
        try:
            await js.stream_info(name)
        except NotFoundError:
            try:
                await js.add_stream(config)
                return
            except BadRequestError as exc:
                if exc.err_code != _NAME_IN_USE:
                    raise  # a forming cluster's refusal is waited out; any other is the error
        try:
            await js.update_stream(config)
        except APIError as exc:
            _kept_as_it_is(f"stream {name}", exc)

    await target.declare(f"stream {name} (replicas {config.num_replicas})", attempt)


async def _ensure_consumer(target: _Target, stream: str, config: ConsumerConfig) -> None:
    # A stream just created on a cluster may not have elected its leader yet, or not be known
    # to this node: its first consumer request can go unanswered or find no stream. Both are waits.
    durable = config.durable_name
    assert durable is not None  # every consumer Agentix declares is durable

    async def attempt(js: JetStreamContext) -> None:
        try:
            await js.add_consumer(stream, config)
        except APIError as exc:
            if is_settling(exc):
                raise
            try:  # refused: an existing consumer is kept; one that cannot be created is the error
                await js.consumer_info(stream, durable)
            except NotFoundError:
                raise exc from None
            _kept_as_it_is(f"consumer {durable} on {stream}", exc)

    await target.declare(f"consumer {durable} on {stream}", attempt)


async def _work_queue(
    target: _Target,
    name: str,
    subjects: list[str],
    durable: str,
    ack_wait_s: float,
    max_deliver: int,
    max_ack_pending: int,
) -> None:
    """A work-queue stream (each message goes to one worker, deleted once acked; duplicates by
    `Nats-Msg-Id` dropped for 2 minutes) and its one durable pull consumer with bounded redelivery."""
    await _ensure_stream(
        target,
        StreamConfig(
            name=name,
            subjects=subjects,
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            num_replicas=target.settings.js_replicas,
            duplicate_window=120.0,
        ),
    )
    await _ensure_consumer(
        target,
        name,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait_s,
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
        ),
    )


async def _dead_letters(target: _Target, queues: list[tuple[str, str]]) -> None:
    """The server announces a message that used up `max_deliver` with a core advisory, which is
    lost when no service listens at that moment (every worker of the queue had died). A stream
    keeps those advisories, and one durable consumer per work queue hands each to a live worker
    whenever one runs, so an exhausted task or job always ends recorded as failed."""
    n = target.names
    await _ensure_stream(
        target,
        StreamConfig(
            name=n.dead_stream,
            subjects=[n.exhausted_subject(stream, consumer) for stream, consumer in queues],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            num_replicas=target.settings.js_replicas,
            max_age=float(DEAD_LETTER_MAX_AGE_S),
        ),
    )
    for stream, consumer in queues:
        await _ensure_consumer(
            target,
            n.dead_stream,
            ConsumerConfig(
                durable_name=n.dead_consumer(consumer),
                ack_policy=AckPolicy.EXPLICIT,
                filter_subject=n.exhausted_subject(stream, consumer),
                ack_wait=30.0,
                max_deliver=-1,  # recording the failure must eventually succeed
            ),
        )


async def declare_all(nc: Client, settings: CommonSettings, on_wait: Waiting | None = None) -> None:
    """Declare everything, each through a forming cluster; `on_wait` hears each wait (a start state)."""
    target = _Target(nc, settings, names_for(settings), subjects_for(settings), on_wait)
    s, n, cfg = target.subjects, target.names, target.settings
    replicas = cfg.js_replicas

    await _work_queue(
        target, n.tasks_stream, [s.tasks_submit, s.tasks_resume], n.dispatcher_consumer,
        cfg.task_ack_wait_s, cfg.task_max_deliver, cfg.task_max_ack_pending,
    )

    await _ensure_stream(
        target,
        StreamConfig(
            name=n.events_stream,
            subjects=[f"{s.prefix}.events.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=replicas,
            max_age=float(cfg.events_max_age_s),
            max_bytes=cfg.events_max_bytes,
            discard=DiscardPolicy.OLD,
            # Every event has a msg id (`<task>:<n>`) and the server remembers each for this
            # long: enough for a write retried through an election (RETRY_FOR_S), and short
            # enough that a fast token stream does not fill its memory with ids.
            duplicate_window=EVENTS_DEDUPE_WINDOW_S,
            # Each event, once stored, also goes to `P.live.<task>.<channel>`: the gateway follows
            # a task it has just queued there, with no consumer of its own (`task_feeds`).
            republish=RePublish(src=f"{s.prefix}.events.>", dest=s.live_all),
        ),
    )
    await _ensure_consumer(
        target,
        n.events_stream,
        ConsumerConfig(
            durable_name=n.recorder_consumer,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            filter_subjects=[f"{s.prefix}.events.*.status", f"{s.prefix}.events.*.exec"],
            ack_wait=30.0,
            max_deliver=20,
            max_ack_pending=1000,
        ),
    )
    # The conversation queue (the gateway's chat runs): the status channel alone, where a run's
    # `running`, `waiting` and `done` are.
    await _ensure_consumer(
        target,
        n.events_stream,
        ConsumerConfig(
            durable_name=n.chat_consumer,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            filter_subject=f"{s.prefix}.events.*.status",
            ack_wait=30.0,
            max_deliver=20,
            max_ack_pending=1000,
        ),
    )

    await _work_queue(
        target, n.ingest_stream, [s.ingest_jobs], n.ingest_consumer,
        cfg.ingest_ack_wait_s, cfg.ingest_max_deliver, cfg.ingest_max_ack_pending,
    )
    await _schedules(target)
    await _callbacks(target)
    await _dead_letters(target, [(n.tasks_stream, n.dispatcher_consumer), (n.ingest_stream, n.ingest_consumer),
                                 (n.callbacks_stream, n.callbacks_consumer)])

    await _ensure_kv(target, KeyValueConfig(bucket=n.control_bucket, history=5, replicas=replicas))
    await _ensure_kv(
        target, KeyValueConfig(bucket=n.checkpoints_bucket, history=1, ttl=CHECKPOINT_TTL_S, replicas=replicas)
    )
    for bucket in (n.reports_bucket, n.uploads_bucket):
        await _ensure_object_store(target, bucket, replicas)
    await _mcp(target)


async def _mcp(target: _Target) -> None:
    """MCP sessions: their records (any gateway replica serves any session) and the log of their
    server-to-client notifications (a GET stream resumes on any replica from its `Last-Event-ID`)."""
    s, n, replicas = target.subjects, target.names, target.settings.js_replicas
    await _ensure_kv(
        target, KeyValueConfig(bucket=n.mcp_sessions_bucket, history=1, ttl=MCP_SESSION_TTL_S, replicas=replicas)
    )
    await _ensure_stream(
        target,
        StreamConfig(
            name=n.mcp_stream,
            subjects=[f"{s.prefix}.mcp.events.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=replicas,
            max_age=float(MCP_EVENTS_MAX_AGE_S),
            discard=DiscardPolicy.OLD,
        ),
    )


async def _schedules(target: _Target) -> None:
    """The schedules stream: each schedule is the last message on `P.schedules.def.<id>` with a
    `Nats-Schedule` header, and the server (its stream leader, replicated) publishes each fire on
    `P.schedules.fire.<id>`, where the gateways' one durable consumer takes it. Fires carry a
    per-message TTL (`Nats-Schedule-TTL`), so the stream keeps the definitions and a bounded tail."""
    s, n = target.subjects, target.names
    await _ensure_stream(
        target,
        StreamConfig(
            name=n.schedules_stream,
            subjects=[f"{s.prefix}.schedules.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=target.settings.js_replicas,
            duplicate_window=SCHEDULE_DEDUPE_WINDOW_S,
            allow_msg_schedules=True,
            allow_msg_ttl=True,
        ),
    )
    await _ensure_consumer(
        target,
        n.schedules_stream,
        ConsumerConfig(
            durable_name=n.triggers_consumer,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            filter_subject=s.schedule_fires_all,
            ack_wait=30.0,
            max_deliver=-1,
            max_ack_pending=1000,
        ),
    )


async def _callbacks(target: _Target) -> None:
    """Completion callbacks: a durable consumer of the task ends (`done` on the status channel)
    that turns each one owing a callback into a delivery message, and the work queue those wait
    in until a gateway delivers them (max_deliver unbounded: the gateway gives up on its own
    clock, `callback_max_age_s`, with the delivery log saying so). From new events on: ends
    before the consumer existed owe nothing (no task could name a callback then)."""
    s, n, cfg = target.subjects, target.names, target.settings
    await _ensure_consumer(
        target,
        n.events_stream,
        ConsumerConfig(
            durable_name=n.callback_ends_consumer,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.NEW,
            filter_subject=f"{s.prefix}.events.*.status",
            ack_wait=30.0,
            max_deliver=-1,
            max_ack_pending=1000,
        ),
    )
    await _work_queue(target, n.callbacks_stream, [s.callbacks_deliver], n.callbacks_consumer,
                      cfg.callback_ack_wait_s, -1, 1000)


async def _ensure_kv(target: _Target, config: KeyValueConfig) -> None:
    async def attempt(js: JetStreamContext) -> None:
        try:
            await js.key_value(config.bucket)
            return
        except NotFoundError:
            pass
        try:
            await js.create_key_value(config)
        except BadRequestError as exc:
            if exc.err_code != _NAME_IN_USE:
                raise
            # created concurrently with another config: it exists, and is used as it is

    await target.declare(f"KV bucket {config.bucket} (replicas {config.replicas})", attempt)


async def _ensure_object_store(target: _Target, bucket: str, replicas: int) -> None:
    async def attempt(js: JetStreamContext) -> None:
        try:
            await js.object_store(bucket)
            return
        except NotFoundError:
            pass
        try:
            await js.create_object_store(bucket, ObjectStoreConfig(replicas=replicas))
        except BadRequestError as exc:
            if exc.err_code != _NAME_IN_USE:
                raise
            # created concurrently with another config: it exists, and is used as it is

    await target.declare(f"object store {bucket} (replicas {replicas})", attempt)
