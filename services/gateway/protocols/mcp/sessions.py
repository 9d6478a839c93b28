"""MCP sessions (handshake-era Streamable HTTP: `initialize` gives an `Mcp-Session-Id`) kept in
JetStream KV (bucket `P_mcp_sessions`), never in one gateway's memory: every replica serves every
request of every session, and a replica's death loses no session.

A request is still served on its own (the SDK's stateless transport, or `single_exchange`); what a
session adds — its owner, the client's capabilities, its resource subscriptions, where its GET
stream starts — is this record. Its server-to-client notifications live in a stream
(`notifications.py`), so a GET stream can be resumed on another replica."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from pydantic import BaseModel, Field

from shared.bus.client import Bus
from shared.bus.kv import kv_get, kv_put, kv_update
from shared.bus.retry import with_retries

# What we issue (uuid4 hex); anything else is not one of our sessions and answers 404 unread.
SESSION_ID = re.compile(r"[0-9a-f]{32}")
MAX_SUBSCRIPTIONS = 200  # per session: the record stays one small KV value
CAS_ATTEMPTS = 10


class McpSessionRecord(BaseModel):
    user_id: str
    protocol_version: str
    client_info: dict[str, Any] = Field(default_factory=dict)
    capabilities: dict[str, Any] = Field(default_factory=dict)
    subscriptions: list[str] = Field(default_factory=list)
    # The notifications stream's last sequence when the session began: a GET stream opened
    # without `Last-Event-ID` starts after it, so nothing sent since `initialize` is missed.
    since: int = 0


def user_key(user_id: str) -> str:
    """A user's token in subjects: user ids may hold characters a subject cannot."""
    return hashlib.sha256(user_id.encode()).hexdigest()[:32]


class McpSessions:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._kv: KeyValue | None = None

    async def kv(self) -> KeyValue:
        if self._kv is None:
            bucket = self.bus.names.mcp_sessions_bucket
            self._kv = await with_retries(lambda: self.bus.js.key_value(bucket), what=f"KV bucket {bucket}")
        return self._kv

    async def _last_seq(self) -> int:
        stream = self.bus.names.mcp_stream
        info = await with_retries(lambda: self.bus.js.stream_info(stream), what=f"stream {stream}")
        return int(info.state.last_seq or 0)

    async def create(self, user_id: str, protocol_version: str, client_info: dict[str, Any],
                     capabilities: dict[str, Any]) -> str:  # fmt: skip
        session_id = uuid.uuid4().hex
        record = McpSessionRecord(user_id=user_id, protocol_version=protocol_version, client_info=client_info,
                                  capabilities=capabilities, since=await self._last_seq())  # fmt: skip
        await kv_put(await self.kv(), session_id, record.model_dump_json().encode())
        return session_id

    async def get(self, session_id: str) -> tuple[McpSessionRecord, int] | None:
        """The record and its revision; None for an unknown, ended or expired session."""
        if not SESSION_ID.fullmatch(session_id):
            return None
        try:
            entry = await kv_get(await self.kv(), session_id)
        except KeyNotFoundError:
            return None
        if entry.value is None or not entry.value:
            return None
        return McpSessionRecord.model_validate_json(entry.value), int(entry.revision or 0)

    async def owned(self, session_id: str, user_id: str) -> McpSessionRecord | None:
        """The session if it is `user_id`'s: another user's answers as an unknown one does."""
        found = await self.get(session_id)
        return found[0] if found is not None and found[0].user_id == user_id else None

    async def subscribe(self, session_id: str, uri: str, on: bool) -> bool:
        """Add (`on`) or remove a subscription, compare-and-set against concurrent requests of the
        session on other replicas. False: the session is gone (or at its subscription limit)."""
        kv = await self.kv()
        for _ in range(CAS_ATTEMPTS):
            found = await self.get(session_id)
            if found is None:
                return False
            record, revision = found
            subs = [s for s in record.subscriptions if s != uri]
            if on:
                if len(subs) >= MAX_SUBSCRIPTIONS:
                    return False
                subs.append(uri)
            if subs == record.subscriptions:
                return True
            record.subscriptions = subs
            try:
                await kv_update(kv, session_id, record.model_dump_json().encode(), revision)
                return True
            except KeyWrongLastSequenceError:
                continue  # another request of this session wrote first: read again
        raise RuntimeError(f"MCP session {session_id}: subscriptions kept changing")

    async def end(self, session_id: str) -> None:
        kv = await self.kv()
        await with_retries(lambda: kv.delete(session_id), what=f"KV delete {session_id}")


def peek_initialize(message: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """(protocol version, client info, capabilities) of an `initialize` request, else None."""
    if message.get("method") != "initialize" or "id" not in message:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    version, info, caps = params.get("protocolVersion"), params.get("clientInfo"), params.get("capabilities")
    return (str(version) if isinstance(version, str) else "", info if isinstance(info, dict) else {},
            caps if isinstance(caps, dict) else {})  # fmt: skip


def dumps(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
