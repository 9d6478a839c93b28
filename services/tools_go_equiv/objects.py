"""The JetStream object stores this service uses: uploads awaiting ingestion, and report files."""

from __future__ import annotations

import base64
import contextlib
import tempfile

from nats.js.object_store import ObjectStore

from shared.bus import Bus


async def uploads(bus: Bus) -> ObjectStore:
    return await bus.object_store(bus.names.uploads_bucket)


async def reports(bus: Bus) -> ObjectStore:
    return await bus.object_store(bus.names.reports_bucket)


def digest_hex(digest: str | None) -> str:
    """`SHA-256=<base64url>` (object info) → lowercase hex, the content hash used everywhere."""
    if not digest or "=" not in digest:
        raise ValueError(f"object has no SHA-256 digest: {digest!r}")
    return base64.urlsafe_b64decode(digest.split("=", 1)[1] + "==").hex()


async def read_all(store: ObjectStore, name: str) -> bytes:
    with tempfile.TemporaryFile() as f:
        await store.get(name, writeinto=f)  # linear, unlike an in-memory get (BUS.md)
        f.seek(0)
        return f.read()


async def delete_quietly(store: ObjectStore, name: str) -> None:
    with contextlib.suppress(Exception):
        await store.delete(name)
