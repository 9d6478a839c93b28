"""The caller's long-term memory (tools_go_equiv `memory_*` tools over NATS). Delete is soft."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from services.gateway.deps import BusDep, CurrentUser
from services.gateway.pagination import Cursor, Limit, decode_cursor, encode_cursor
from services.gateway.routes.kb import call_go_tool

router = APIRouter(prefix="/memory", tags=["memory"])
Key = Annotated[str, Path(min_length=1, max_length=200)]


class MemoryIn(BaseModel):
    value: Any = Field(description="any JSON value")


@router.get("")
async def list_memory(
    user: CurrentUser,
    bus: BusDep,
    prefix: Annotated[str | None, Query(max_length=200)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    raw = decode_cursor(cursor) if cursor else None
    out = await call_go_tool(bus, user.id, "memory_list", {"prefix": prefix, "limit": limit, "cursor": raw})
    nxt = out.get("next_cursor")
    return {"items": out["items"], "next_cursor": encode_cursor(nxt) if nxt else None}


@router.get("/{key}")
async def get_memory(key: Key, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    return await call_go_tool(bus, user.id, "memory_get", {"key": key})


@router.put("/{key}")
async def put_memory(key: Key, body: MemoryIn, request: Request, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    request.state.audit_target = f"memory={key}"
    return await call_go_tool(bus, user.id, "memory_upsert", {"key": key, "value": body.value})


@router.delete("/{key}")
async def delete_memory(key: Key, request: Request, user: CurrentUser, bus: BusDep) -> dict[str, Any]:
    request.state.audit_target = f"memory={key}"
    return await call_go_tool(bus, user.id, "memory_delete", {"key": key})
