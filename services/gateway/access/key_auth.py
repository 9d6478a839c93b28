"""An API key on a request: the principal it stands for, or why it is refused.

A key's record is read from the database once and kept for `KEY_CACHE_TTL_S` (a client sends
the same key with every request); a revocation drops it at once on every gateway replica
(`key_revocations.py` broadcasts it over NATS), and a replica that lost NATS for a while drops
all it keeps when it is back (it may have missed a revocation meanwhile). When a key was last
used is written in batches (`LAST_USED_FLUSH_S`), never by the request itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime

from sqlalchemy import Connection, Table

from services.gateway.access.api_keys import KeyRecord, find, hash_secret, key_hash
from services.gateway.access.auth import AuthError
from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.tables import ApiKey
from shared.settings import GatewaySettings

log = logging.getLogger("agentix.gateway.keys")
KEY_CACHE_TTL_S = 30.0
KEY_CACHE_MAX = 4096
LAST_USED_FLUSH_S = 10.0
API_KEYS: Table = ApiKey.__table__  # type: ignore[attr-defined]


def write_last_used(conn: Connection, used: dict[str, datetime]) -> None:
    for key_id, at in used.items():
        conn.execute(API_KEYS.update().where(API_KEYS.c.id == key_id)
                     .where((API_KEYS.c.last_used_at.is_(None)) | (API_KEYS.c.last_used_at < at))
                     .values(last_used_at=at))


class KeyVerifier:
    def __init__(self, db: Database, settings: GatewaySettings, ttl_s: float = KEY_CACHE_TTL_S,
                 flush_s: float = LAST_USED_FLUSH_S) -> None:
        self.db = db
        self.secret = hash_secret(settings)
        self.ttl_s = ttl_s
        self.flush_s = flush_s
        self._records: dict[str, tuple[KeyRecord, float]] = {}  # key hash → (record, kept until, monotonic)
        self._used: dict[str, datetime] = {}  # key id → last use not yet written
        self._flusher: asyncio.Task[None] | None = None
        self.lookups = 0  # database reads, for tests and the bench

    async def principal(self, key: str) -> Principal:
        digest = key_hash(self.secret, key)
        record = self._cached(digest)
        if record is None:
            self.lookups += 1
            record = await self.db.run(find, digest)
            if record is None:
                raise AuthError("The API key is not valid.")
            self._keep(digest, record)
        if record.revoked:
            raise AuthError("The API key was revoked.")
        if record.expires_at is not None and time.time() >= record.expires_at:
            raise AuthError("The API key has expired.")
        self._touch(record.id)
        return record.principal

    def _cached(self, digest: str) -> KeyRecord | None:
        entry = self._records.get(digest)
        if entry is None:
            return None
        if time.monotonic() >= entry[1]:
            del self._records[digest]
            return None
        return entry[0]

    def _keep(self, digest: str, record: KeyRecord) -> None:
        if digest not in self._records and len(self._records) >= KEY_CACHE_MAX:
            del self._records[next(iter(self._records))]
        self._records[digest] = (record, time.monotonic() + self.ttl_s)

    def drop(self, key_id: str) -> None:
        """Forget a key (revoked): its next use reads the database."""
        for digest, (record, _) in list(self._records.items()):
            if record.id == key_id:
                del self._records[digest]

    def clear(self) -> None:
        self._records.clear()

    def _touch(self, key_id: str) -> None:
        self._used[key_id] = datetime.now(UTC)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="api-key-last-used")

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.flush_s)
        await self.flush()

    async def flush(self) -> None:
        """Write the last uses gathered so far (one transaction)."""
        used, self._used = self._used, {}
        if not used:
            return
        try:
            await self.db.run_grouped(write_last_used, used)
        except Exception:
            log.warning("could not record the last use of %d API key(s)", len(used), exc_info=True)

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()
