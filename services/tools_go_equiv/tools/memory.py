"""Long-term memory: per-user key → JSON value entries. Delete is soft (the row stays, marked
deleted, and a later upsert revives it). Every call acts on one user's memory: the injected
`user_id` (the gateway names another user there only for an admin, see `user_of`)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field, field_validator
from sqlalchemy import Connection, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from services.tools_go_equiv import runtime
from services.tools_go_equiv.db.schema import memories
from services.tools_go_equiv.ids import iso, now
from services.tools_go_equiv.registry import DELETES, OVERWRITES, READS, registry
from services.tools_go_equiv.tools.common import Page, UserArgs, user_of
from shared.bus.tools import ToolContext, ToolFailure

MAX_VALUE_BYTES = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class KeyArgs(UserArgs):
    key: str = Field(min_length=1, max_length=200)

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        if _CONTROL.search(key):
            raise ValueError("key must not contain control characters")
        return key


class UpsertArgs(KeyArgs):
    value: Any = Field(description="any JSON value")


class ListArgs(UserArgs, Page):
    prefix: str | None = Field(default=None, max_length=200)


def _public(row: Any) -> dict[str, Any]:
    return {
        "key": row.key,
        "user_id": row.user_id,
        "value": json.loads(row.value),
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def _get(conn: Connection, user: str, key: str) -> Any:
    return conn.execute(
        select(memories).where(memories.c.user_id == user, memories.c.key == key, memories.c.deleted_at.is_(None))
    ).first()


def _upsert(conn: Connection, user: str, key: str, value: str) -> tuple[Any, bool]:
    existed = _get(conn, user, key) is not None
    ts = now()
    ins = sqlite_insert if conn.dialect.name == "sqlite" else pg_insert
    stmt = ins(memories).values(user_id=user, key=key, value=value, created_at=ts, updated_at=ts, deleted_at=None)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["user_id", "key"], set_={"value": value, "updated_at": ts, "deleted_at": None}
        )
    )
    return _get(conn, user, key), not existed


def _list(conn: Connection, user: str, prefix: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
    q = (
        select(memories)
        .where(memories.c.user_id == user, memories.c.deleted_at.is_(None))
        .order_by(memories.c.key)
        .limit(limit + 1)
    )
    if prefix:
        q = q.where(memories.c.key.startswith(prefix, autoescape=True))
    if cursor:
        q = q.where(memories.c.key > cursor)
    rows = conn.execute(q).all()
    return {
        "items": [_public(r) for r in rows[:limit]],
        "next_cursor": rows[limit - 1].key if len(rows) > limit else None,
    }


def _delete(conn: Connection, user: str, key: str) -> bool:
    result = conn.execute(
        update(memories)
        .where(memories.c.user_id == user, memories.c.key == key, memories.c.deleted_at.is_(None))
        .values(deleted_at=now(), updated_at=now())
    )
    return result.rowcount > 0


@registry.tool(
    name="memory_get",
    title="Recall a memory",
    description="The caller's long-term memory entry for a key.",
    inject=("user_id",),
    annotations=READS,
)
async def memory_get(args: KeyArgs, ctx: ToolContext) -> dict[str, Any]:
    row = await runtime.get().db.read(_get, user_of(args, ctx), args.key)
    if row is None:
        raise ToolFailure("not_found", f"no memory under {args.key!r}")
    return _public(row)


@registry.tool(
    name="memory_upsert",
    title="Remember something",
    description="Store (or replace) a long-term memory entry for the caller under a key; the value is any JSON.",
    inject=("user_id",),
    annotations=OVERWRITES,
)
async def memory_upsert(args: UpsertArgs, ctx: ToolContext) -> dict[str, Any]:
    value = json.dumps(args.value, ensure_ascii=False)
    if len(value.encode()) > MAX_VALUE_BYTES:
        raise ToolFailure("too_large", f"value is larger than {MAX_VALUE_BYTES} bytes as JSON")
    row, created = await runtime.get().db.run(_upsert, user_of(args, ctx), args.key, value)
    return {**_public(row), "created": created}


@registry.tool(
    name="memory_list",
    title="List memories",
    description="The caller's memory entries, by key.",
    inject=("user_id",),
    annotations=READS,
)
async def memory_list(args: ListArgs, ctx: ToolContext) -> dict[str, Any]:
    return await runtime.get().db.read(_list, user_of(args, ctx), args.prefix, args.limit, args.cursor)


@registry.tool(
    name="memory_delete",
    title="Forget a memory",
    description="Delete (softly) the caller's memory entry for a key.",
    inject=("user_id",),
    annotations=DELETES,
)
async def memory_delete(args: KeyArgs, ctx: ToolContext) -> dict[str, Any]:
    if not await runtime.get().db.run(_delete, user_of(args, ctx), args.key):
        raise ToolFailure("not_found", f"no memory under {args.key!r}")
    return {"deleted": args.key}
