"""The LangGraph store over Agentix memory: each user's store is their long-term memory (the
tools_go_equiv `memory_*` tools, reached over NATS), so an item written through the SDK is a
memory the agent's `memory_get`/`memory_list` read, and a memory the agent wrote is an item.

An item `(namespace, key)` is the memory under `"<label>.<label>…:<key>"`; the namespace
`["memory"]` is the memories with no `:` in their key (the ones an agent writes by name). A
memory's value that is not an object is the item `{"value": <it>}`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.access.principal import Principal
from services.gateway.go_tools import call_go_tool
from services.gateway.pagination import MAX_OFFSET
from services.gateway.problems import ApiProblem
from shared.bus import Bus

MEMORY: Final = ("memory",)  # the namespace of the memories an agent names plainly
MAX_KEY: Final = 200  # a memory key's length
_PAGE: Final = 200  # memory_list's largest page
Namespace = list[str]


class ItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: Namespace = Field(min_length=1, max_length=20)
    key: str = Field(min_length=1, max_length=MAX_KEY)
    value: dict[str, Any] | None
    index: bool | list[str] | None = None  # every item is searchable by `query` (as text)
    ttl: float | None = None


class ItemRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: Namespace = Field(min_length=1, max_length=20)
    key: str = Field(min_length=1, max_length=MAX_KEY)


class ItemSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace_prefix: Namespace = Field(default_factory=list, max_length=20)
    filter: dict[str, Any] | None = None
    query: str | None = Field(default=None, max_length=2000)
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    refresh_ttl: bool | None = None


class NamespaceSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefix: Namespace | None = Field(default=None, max_length=20)
    suffix: Namespace | None = Field(default=None, max_length=20)
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


def _invalid(field: str, why: str) -> ApiProblem:
    return ApiProblem(422, "Invalid request", f"{field}: {why}.", errors=[{"code": "invalid", "field": field,
                                                                         "message": why}])


def memory_key(namespace: Sequence[str], key: str) -> str:
    """The memory an item is; 422 for what no memory key can say."""
    for label in namespace:
        if not label or "." in label or ":" in label:
            raise _invalid("namespace", f"label {label!r}: a label is not empty and has no '.' or ':'")
    if tuple(namespace) == MEMORY:
        if ":" in key:
            raise _invalid("key", "a key in the namespace [\"memory\"] has no ':'")
        return key
    found = f"{'.'.join(namespace)}:{key}"
    if len(found) > MAX_KEY:
        raise _invalid("key", f"the namespace and key are {len(found)} characters; at most {MAX_KEY - 1} in all")
    return found


def split(memory: str) -> tuple[Namespace, str]:
    """A memory key's namespace and key."""
    head, colon, key = memory.partition(":")
    if not colon or not head:
        return list(MEMORY), memory
    return head.split("."), key


def item(memory: dict[str, Any]) -> dict[str, Any]:
    namespace, key = split(memory["key"])
    value = memory["value"]
    return {"namespace": namespace, "key": key, "value": value if isinstance(value, dict) else {"value": value},
            "created_at": memory["created_at"], "updated_at": memory["updated_at"]}


async def put(bus: Bus, user: Principal, body: ItemIn) -> None:
    """A `null` value deletes the item (as LangGraph's store does)."""
    if body.ttl is not None:
        raise _invalid("ttl", "not supported: a memory stays until it is deleted")
    found = memory_key(body.namespace, body.key)
    if body.value is None:
        await delete(bus, user, ItemRef(namespace=body.namespace, key=body.key))
        return
    await call_go_tool(bus, user, "memory_upsert", {"key": found, "value": body.value})


async def get(bus: Bus, user: Principal, namespace: Sequence[str], key: str) -> dict[str, Any]:
    return item(await call_go_tool(bus, user, "memory_get", {"key": memory_key(namespace, key)}))


async def delete(bus: Bus, user: Principal, ref: ItemRef) -> None:
    """Deleting what is not there is not an error (as LangGraph's store)."""
    try:
        await call_go_tool(bus, user, "memory_delete", {"key": memory_key(ref.namespace, ref.key)})
    except ApiProblem as problem:
        if problem.status != 404:
            raise


async def _memories(bus: Bus, user: Principal, prefix: Sequence[str]) -> list[dict[str, Any]]:
    """Every item under the namespace prefix, by memory key."""
    for label in prefix:
        memory_key([label], "k")  # the labels' check
    key_prefix = ".".join(prefix) if prefix and tuple(prefix) != MEMORY else None
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await call_go_tool(bus, user, "memory_list", {"prefix": key_prefix, "limit": _PAGE, "cursor": cursor})
        found += [i for i in map(item, page["items"]) if i["namespace"][:len(prefix)] == list(prefix)]
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def _matches(found: dict[str, Any], where: dict[str, Any] | None, query: str | None) -> bool:
    value = found["value"]
    if any(value.get(field) != wanted for field, wanted in (where or {}).items()):
        return False
    if query:
        text = f"{found['key']} {json.dumps(value, ensure_ascii=False)}".lower()
        return all(word in text for word in query.lower().split())
    return True


async def search(bus: Bus, user: Principal, body: ItemSearch) -> list[dict[str, Any]]:
    """Under the prefix, by namespace and key; `filter` matches fields exactly, `query` as words
    every one of which is in the item's key or value (a text match, not a semantic one)."""
    found = [i for i in await _memories(bus, user, body.namespace_prefix) if _matches(i, body.filter, body.query)]
    found.sort(key=lambda i: (i["namespace"], i["key"]))
    return [{**i, "score": None} for i in found[body.offset:body.offset + body.limit]]


async def namespaces(bus: Bus, user: Principal, body: NamespaceSearch) -> list[Namespace]:
    found: set[tuple[str, ...]] = set()
    for i in await _memories(bus, user, body.prefix or []):
        namespace = tuple(i["namespace"])
        if body.suffix and (len(namespace) < len(body.suffix) or namespace[-len(body.suffix):] != tuple(body.suffix)):
            continue
        found.add(namespace[:body.max_depth] if body.max_depth else namespace)
    return [list(n) for n in sorted(found)][body.offset:body.offset + body.limit]
