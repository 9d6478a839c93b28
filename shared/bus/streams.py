"""One idempotent declaration of every stream, consumer, KV bucket and object store (BUS.md).
Whichever service starts first creates them; the others find them in place.

It takes the JetStream context and the settings, not a `Bus`, so that `client.py` (whose
`Bus.declare` calls it) and this module do not import each other."""

from __future__ import annotations

import logging
from dataclasses import dataclass

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
from nats.js.errors import BadRequestError, NotFoundError

from shared.bus.names import Names, Subjects, names_for, subjects_for
from shared.bus.retry import RETRY_FOR_S, with_retries
from shared.settings import CommonSettings

log = logging.getLogger("agentix.bus.streams")

CHECKPOINT_TTL_S = 30 * 24 * 3600
DEAD_LETTER_MAX_AGE_S = 7 * 24 * 3600
EVENTS_DEDUPE_WINDOW_S = 2 * RETRY_FOR_S


@dataclass(frozen=True)
class _Target:
    """What a declaration needs: where to declare, and the deployment's names and settings."""

    js: JetStreamContext
    settings: CommonSettings
    names: Names
    subjects: Subjects


async def _ensure_stream(target: _Target, config: StreamConfig) -> None:
    assert config.name is not None  # every stream Agentix declares is named
    try:
        await target.js.stream_info(config.name)
    except NotFoundError:
        try:
            await target.js.add_stream(config)
            return
        except BadRequestError as refused:
            # Created concurrently by another service; otherwise the refusal itself (say, too few
            # peers yet for its replicas) is the error to report, not a failed update after it.
            try:
                await target.js.stream_info(config.name)
            except NotFoundError:
                raise refused from None
    try:
        await target.js.update_stream(config)
    except BadRequestError as exc:
        log.warning("stream %s exists with a different config that cannot be updated: %s", config.name, exc)


async def _ensure_consumer(target: _Target, stream: str, config: ConsumerConfig) -> None:
    try:
        # A stream just created on a cluster may not have elected its leader yet: its first
        # consumer request can go unanswered, which is a wait, not a failure.
        await with_retries(lambda: target.js.add_consumer(stream, config),
                           what=f"creating consumer {config.durable_name} on {stream}")
    except BadRequestError as exc:
        log.warning("consumer %s on %s exists with another config: %s", config.durable_name, stream, exc)


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


async def declare_all(js: JetStreamContext, settings: CommonSettings) -> None:
    target = _Target(js, settings, names_for(settings), subjects_for(settings))
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
    await _dead_letters(target, [(n.tasks_stream, n.dispatcher_consumer), (n.ingest_stream, n.ingest_consumer)])

    await _ensure_kv(target, KeyValueConfig(bucket=n.control_bucket, history=5, replicas=replicas))
    await _ensure_kv(
        target, KeyValueConfig(bucket=n.checkpoints_bucket, history=1, ttl=CHECKPOINT_TTL_S, replicas=replicas)
    )
    for bucket in (n.reports_bucket, n.uploads_bucket):
        try:
            await target.js.object_store(bucket)
        except (NotFoundError, BadRequestError):
            try:
                await target.js.create_object_store(bucket, ObjectStoreConfig(replicas=replicas))
            except BadRequestError:  # created concurrently
                pass


async def _ensure_kv(target: _Target, config: KeyValueConfig) -> None:
    try:
        await target.js.key_value(config.bucket)
    except (NotFoundError, BadRequestError):
        try:
            await target.js.create_key_value(config)
        except BadRequestError:  # created concurrently
            pass
