"""One idempotent declaration of every stream, consumer, KV bucket and object store (BUS.md).
Whichever service starts first creates them; the others find them in place."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError

if TYPE_CHECKING:
    from shared.bus.client import Bus

log = logging.getLogger("agentix.bus.streams")

CHECKPOINT_TTL_S = 30 * 24 * 3600
DEAD_LETTER_MAX_AGE_S = 7 * 24 * 3600


async def _ensure_stream(bus: Bus, config: StreamConfig) -> None:
    try:
        await bus.js.stream_info(config.name)
    except NotFoundError:
        try:
            await bus.js.add_stream(config)
            return
        except BadRequestError:  # created concurrently by another service
            pass
    try:
        await bus.js.update_stream(config)
    except BadRequestError as exc:
        log.warning("stream %s exists with a different config that cannot be updated: %s", config.name, exc)


async def _ensure_consumer(bus: Bus, stream: str, config: ConsumerConfig) -> None:
    try:
        await bus.js.add_consumer(stream, config)
    except BadRequestError as exc:
        log.warning("consumer %s on %s exists with another config: %s", config.durable_name, stream, exc)


async def _work_queue(
    bus: Bus, name: str, subjects: list[str], durable: str, ack_wait_s: float, max_deliver: int, max_ack_pending: int
) -> None:
    """A work-queue stream (each message goes to one worker, deleted once acked; duplicates by
    `Nats-Msg-Id` dropped for 2 minutes) and its one durable pull consumer with bounded redelivery."""
    await _ensure_stream(
        bus,
        StreamConfig(
            name=name,
            subjects=subjects,
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            num_replicas=bus.settings.js_replicas,
            duplicate_window=120.0,
        ),
    )
    await _ensure_consumer(
        bus,
        name,
        ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait_s,
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
        ),
    )


async def _dead_letters(bus: Bus, queues: list[tuple[str, str]]) -> None:
    """The server announces a message that used up `max_deliver` with a core advisory, which is
    lost when no service listens at that moment (every worker of the queue had died). A stream
    keeps those advisories, and one durable consumer per work queue hands each to a live worker
    whenever one runs, so an exhausted task or job always ends recorded as failed."""
    n = bus.names
    await _ensure_stream(
        bus,
        StreamConfig(
            name=n.dead_stream,
            subjects=[n.exhausted_subject(stream, consumer) for stream, consumer in queues],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            num_replicas=bus.settings.js_replicas,
            max_age=float(DEAD_LETTER_MAX_AGE_S),
        ),
    )
    for stream, consumer in queues:
        await _ensure_consumer(
            bus,
            n.dead_stream,
            ConsumerConfig(
                durable_name=n.dead_consumer(consumer),
                ack_policy=AckPolicy.EXPLICIT,
                filter_subject=n.exhausted_subject(stream, consumer),
                ack_wait=30.0,
                max_deliver=-1,  # recording the failure must eventually succeed
            ),
        )


async def declare_all(bus: Bus) -> None:
    s, n, cfg = bus.subjects, bus.names, bus.settings
    replicas = cfg.js_replicas

    await _work_queue(
        bus, n.tasks_stream, [s.tasks_submit, s.tasks_resume], n.dispatcher_consumer,
        cfg.task_ack_wait_s, cfg.task_max_deliver, cfg.task_max_ack_pending,
    )

    await _ensure_stream(
        bus,
        StreamConfig(
            name=n.events_stream,
            subjects=[f"{s.prefix}.events.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=replicas,
            max_age=float(cfg.events_max_age_s),
            max_bytes=cfg.events_max_bytes,
            discard=DiscardPolicy.OLD,
        ),
    )
    await _ensure_consumer(
        bus,
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

    await _work_queue(
        bus, n.ingest_stream, [s.ingest_jobs], n.ingest_consumer,
        cfg.ingest_ack_wait_s, cfg.ingest_max_deliver, cfg.ingest_max_ack_pending,
    )
    await _dead_letters(bus, [(n.tasks_stream, n.dispatcher_consumer), (n.ingest_stream, n.ingest_consumer)])

    await _ensure_kv(bus, KeyValueConfig(bucket=n.control_bucket, history=5, replicas=replicas))
    await _ensure_kv(
        bus, KeyValueConfig(bucket=n.checkpoints_bucket, history=1, ttl=CHECKPOINT_TTL_S, replicas=replicas)
    )
    for bucket in (n.reports_bucket, n.uploads_bucket):
        try:
            await bus.js.object_store(bucket)
        except (NotFoundError, BadRequestError):
            try:
                await bus.js.create_object_store(bucket, ObjectStoreConfig(replicas=replicas))
            except BadRequestError:  # created concurrently
                pass


async def _ensure_kv(bus: Bus, config: KeyValueConfig) -> None:
    try:
        await bus.js.key_value(config.bucket)
    except (NotFoundError, BadRequestError):
        try:
            await bus.js.create_key_value(config)
        except BadRequestError:  # created concurrently
            pass
