"""The caller's long-term memory (tools_go_equiv `memory_*` tools over NATS). Delete is soft.

Memory belongs to one user, so "admins see all" is an explicit choice of whose: an admin may add
`?user_id=` to read or act on that user's memory; anyone else's `user_id` is ignored."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from services.gateway.deps import BusDep, CurrentUser, Principal
from services.gateway.go_tools import call_go_tool
from services.gateway.pagination import Cursor, Limit, decode_cursor, encode_cursor

router = APIRouter(prefix="/api/v1/memory", tags=["memory"])
Key = Annotated[str, Path(min_length=1, max_length=200)]
ForUser = Annotated[
    str | None,
    Query(
        alias="user_id",
        max_length=200,
        description="admins only: whose memory (default: the caller's); ignored for other users",
    ),
]


class MemoryIn(BaseModel):
    value: Any = Field(description="any JSON value")


def _whose(user: Principal, for_user: str | None) -> str | None:
    """Another user's id when an admin asked for one; None means the caller's own memory."""
    return for_user if user.is_admin and for_user and for_user != user.id else None


def _target(request: Request, user: Principal, key: str, for_user: str | None) -> None:
    whose = _whose(user, for_user)
    request.state.audit_target = f"memory={key}" + (f" user={whose}" if whose else "")


@router.get("")
async def list_memory(
    user: CurrentUser,
    bus: BusDep,
    prefix: Annotated[str | None, Query(max_length=200)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
    for_user: ForUser = None,
) -> dict[str, Any]:
    raw = decode_cursor(cursor) if cursor else None
    args = {"prefix": prefix, "limit": limit, "cursor": raw}
    out = await call_go_tool(bus, user, "memory_list", args, for_user=_whose(user, for_user))
    nxt = out.get("next_cursor")
    return {"items": out["items"], "next_cursor": encode_cursor(nxt) if nxt else None}


@router.get("/{key}")
async def get_memory(key: Key, user: CurrentUser, bus: BusDep, for_user: ForUser = None) -> dict[str, Any]:
    return await call_go_tool(bus, user, "memory_get", {"key": key}, for_user=_whose(user, for_user))


@router.put("/{key}")
async def put_memory(
    key: Key, body: MemoryIn, request: Request, user: CurrentUser, bus: BusDep, for_user: ForUser = None
) -> dict[str, Any]:
    _target(request, user, key, for_user)
    args = {"key": key, "value": body.value}
    return await call_go_tool(bus, user, "memory_upsert", args, for_user=_whose(user, for_user))


@router.delete("/{key}")
async def delete_memory(
    key: Key, request: Request, user: CurrentUser, bus: BusDep, for_user: ForUser = None
) -> dict[str, Any]:
    _target(request, user, key, for_user)
    return await call_go_tool(bus, user, "memory_delete", {"key": key}, for_user=_whose(user, for_user))
