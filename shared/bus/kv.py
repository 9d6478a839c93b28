"""KV reads and writes that ride through a leader election (`retry.py`); writes stay idempotent.

A plain put carries a `Nats-Msg-Id` kept across retries: a retry of a put that was stored but
whose ack was lost is dropped as a duplicate and answers the revision the first one got, so a
retry never adds a revision (with another value or the same one).

A compare-and-set (`expected last revision`) retried after a lost ack could otherwise fail
against its own first write: when the retry is refused for a wrong last revision, the key is
read, and if its latest value is exactly what this write wrote, the write had succeeded and that
revision is the answer. A refusal on the first try is a real conflict
(`KeyWrongLastSequenceError`), raised at once as before.
"""

from __future__ import annotations

import uuid

from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from shared.bus.retry import ACK_TIMEOUT_S, with_retries

# JSStreamWrongLastSequenceErrF / JSStreamWrongLastSequenceConstantErr (see nats.js.kv)
_WRONG_LAST_SEQUENCE = (10071, 10164)


async def kv_get(kv: KeyValue, key: str) -> KeyValue.Entry:
    """The key's latest entry, read through a leader election (`KeyNotFoundError` if none)."""
    return await with_retries(lambda: kv.get(key), what=f"KV get {key}")


def key_subject(kv: KeyValue, key: str) -> str:
    """The subject a key's values are published on (`$KV.<bucket>.<key>`)."""
    return f"{kv._pre}{key}"


async def kv_put(kv: KeyValue, key: str, value: bytes, *, msg_id: str | None = None) -> int:
    """Put `value` (retried through an election; exactly one revision). Returns the revision."""
    headers = {"Nats-Msg-Id": msg_id or uuid.uuid4().hex}
    ack = await with_retries(
        lambda: kv._js.publish(key_subject(kv, key), value, timeout=ACK_TIMEOUT_S, headers=dict(headers)),
        what=f"KV put {key}",
    )
    return ack.seq


async def kv_update(kv: KeyValue, key: str, value: bytes, last: int) -> int:
    """Write only if the key's latest revision is `last` (0: the key has no value). Raises
    `KeyWrongLastSequenceError` when another writer got there first."""
    headers = {"Nats-Msg-Id": uuid.uuid4().hex, "Nats-Expected-Last-Subject-Sequence": str(last)}
    attempts = 0

    async def write() -> int:
        nonlocal attempts
        attempts += 1
        try:
            ack = await kv._js.publish(key_subject(kv, key), value, timeout=ACK_TIMEOUT_S, headers=dict(headers))
        except APIError as exc:
            if exc.err_code not in _WRONG_LAST_SEQUENCE:
                raise
            if attempts > 1:  # maybe refused because our own earlier try was stored
                revision = await _revision_holding(kv, key, value)
                if revision is not None:
                    return revision
            raise KeyWrongLastSequenceError(description=exc.description) from exc
        return ack.seq

    return await with_retries(write, what=f"KV update {key}")


async def kv_create(kv: KeyValue, key: str, value: bytes) -> int:
    """Write only if the key has no value (never written, deleted or purged). Raises
    `KeyWrongLastSequenceError` when it has one."""
    try:
        return await kv_update(kv, key, value, last=0)
    except KeyWrongLastSequenceError:
        # A deleted key still has its delete marker as latest revision: write over that.
        try:
            await kv_get(kv, key)
        except KeyNotFoundError as deleted:  # nats-py raises it with the delete marker as entry
            marker = getattr(deleted, "entry", None)
            if marker is None or marker.revision is None:
                raise
            return await kv_update(kv, key, value, last=marker.revision)
        raise


async def _revision_holding(kv: KeyValue, key: str, value: bytes) -> int | None:
    try:
        entry = await kv_get(kv, key)
    except KeyNotFoundError:
        return None
    return entry.revision if entry.value == value else None
