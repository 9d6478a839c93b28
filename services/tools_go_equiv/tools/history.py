"""Conversation history: a capped Redis list per (user, session) when Redis is configured,
else rows in the tools database trimmed to the same cap. The Redis client library is imported
only where Redis is configured (`main.start_runtime`)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field
from sqlalchemy import Connection, delete, insert, select

from services.tools_go_equiv import runtime
from services.tools_go_equiv.db.schema import history
from services.tools_go_equiv.ids import iso, now
from services.tools_go_equiv.registry import APPENDS_CAPPED, READS, registry
from services.tools_go_equiv.tools.common import UserArgs, user_of
from shared.bus.tools import ToolContext, ToolFailure

SESSION = Field(default=None, max_length=200, description="injected: the conversation")


class SessionArgs(UserArgs):
    session_id: str | None = SESSION


class AppendArgs(SessionArgs):
    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(max_length=200_000)


class GetArgs(SessionArgs):
    limit: int = Field(default=20, ge=1, le=1000)


def _session(args: SessionArgs, ctx: ToolContext) -> str:
    session = args.session_id or ctx.meta.session_id or ctx.meta.task_id
    if not session:
        raise ToolFailure("bad_arguments", "session_id is required (it is injected by the caller)")
    return session


def _key(user: str, session: str) -> str:
    rt = runtime.get()
    return f"{rt.settings.redis_key_prefix}history:{user}:{session}"


def _db_append(conn: Connection, user: str, session: str, entry: dict[str, Any], cap: int) -> int:
    conn.execute(
        insert(history).values(
            user_id=user, session_id=session, role=entry["role"], content=entry["content"], created_at=now()
        )
    )
    keep = (
        select(history.c.id)
        .where(history.c.user_id == user, history.c.session_id == session)
        .order_by(history.c.id.desc())
        .limit(cap)
    )
    ids = list(conn.execute(keep).scalars())
    if len(ids) >= cap:
        conn.execute(
            delete(history).where(history.c.user_id == user, history.c.session_id == session, history.c.id < ids[-1])
        )
    return len(ids)


def _db_get(conn: Connection, user: str, session: str, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(history)
        .where(history.c.user_id == user, history.c.session_id == session)
        .order_by(history.c.id.desc())
        .limit(limit)
    ).all()
    return [{"role": r.role, "content": r.content, "ts": iso(r.created_at)} for r in reversed(rows)]


@registry.tool(
    name="history_append",
    title="Append to the conversation history",
    description="Record one message of the current conversation.",
    inject=("user_id", "session_id"),
    annotations=APPENDS_CAPPED,
)
async def history_append(args: AppendArgs, ctx: ToolContext) -> dict[str, Any]:
    user, session = user_of(args, ctx), _session(args, ctx)
    rt = runtime.get()
    entry = {"role": args.role, "content": args.content, "ts": now().isoformat()}
    cap = rt.settings.kb_history_max
    if rt.redis is None:
        length = await rt.db.run(_db_append, user, session, entry, cap)
        return {"session_id": session, "length": length, "store": "db"}
    from redis.exceptions import RedisError  # loaded already: rt.redis is a client

    key = _key(user, session)
    try:
        async with rt.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps(entry, ensure_ascii=False))
            pipe.ltrim(key, -cap, -1)
            pipe.expire(key, rt.settings.kb_history_ttl_s)
            pipe.llen(key)
            *_, length = await pipe.execute()
    except RedisError as exc:
        raise ToolFailure("unavailable", f"history store (Redis) failed: {type(exc).__name__}", retryable=True) from exc
    return {"session_id": session, "length": int(length), "store": "redis"}


@registry.tool(
    name="history_get",
    title="Read the conversation history",
    description="The most recent messages of the current conversation, oldest first.",
    inject=("user_id", "session_id"),
    annotations=READS,
)
async def history_get(args: GetArgs, ctx: ToolContext) -> dict[str, Any]:
    user, session = user_of(args, ctx), _session(args, ctx)
    rt = runtime.get()
    if rt.redis is None:
        return {"session_id": session, "messages": await rt.db.read(_db_get, user, session, args.limit)}
    from redis.exceptions import RedisError  # loaded already: rt.redis is a client

    try:
        raw = await rt.redis.lrange(_key(user, session), -args.limit, -1)
    except RedisError as exc:
        raise ToolFailure("unavailable", f"history store (Redis) failed: {type(exc).__name__}", retryable=True) from exc
    return {"session_id": session, "messages": [json.loads(r) for r in raw]}
