"""`/lg` store routes (thin): the caller's store is their Agentix memory (see `store`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from services.gateway.deps import BusDep
from services.gateway.protocols.langgraph import store
from services.gateway.protocols.langgraph.auth import LgUser
from services.gateway.protocols.langgraph.refusals import known_query
from services.gateway.protocols.langgraph.routes import PREFIX

router = APIRouter(prefix=f"{PREFIX}/store", tags=["langgraph"], dependencies=[Depends(known_query)])


@router.put("/items", status_code=204)
async def put_item(body: store.ItemIn, request: Request, user: LgUser, bus: BusDep) -> Response:
    request.state.audit_target = f"store={'.'.join(body.namespace)}:{body.key}"
    await store.put(bus, user, body)
    return Response(status_code=204)


@router.get("/items")
async def get_item(user: LgUser, bus: BusDep, key: Annotated[str, Query(min_length=1, max_length=store.MAX_KEY)],
                   namespace: Annotated[str, Query(min_length=1, max_length=store.MAX_KEY)],
                   refresh_ttl: Annotated[bool | None, Query()] = None) -> dict[str, Any]:
    """`namespace` is the labels joined by `.` (as the SDK sends it); `refresh_ttl` has nothing
    to refresh: a memory has no TTL."""
    return await store.get(bus, user, namespace.split("."), key)


@router.delete("/items", status_code=204)
async def delete_item(body: store.ItemRef, request: Request, user: LgUser, bus: BusDep) -> Response:
    request.state.audit_target = f"store={'.'.join(body.namespace)}:{body.key}"
    await store.delete(bus, user, body)
    return Response(status_code=204)


@router.post("/items/search")
async def search_items(body: store.ItemSearch, user: LgUser, bus: BusDep) -> dict[str, Any]:
    return {"items": await store.search(bus, user, body)}


@router.post("/namespaces")
async def list_namespaces(body: store.NamespaceSearch, user: LgUser, bus: BusDep) -> dict[str, Any]:
    return {"namespaces": await store.namespaces(bus, user, body)}
