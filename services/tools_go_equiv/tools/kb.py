"""Knowledge-base tools: create/list/delete, search (vector · fulltext · graph · hybrid), the
entity graph around a name, and a title search over documents (wiki-style)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field
from sqlalchemy import Connection, func, or_, select

from services.tools_go_equiv import runtime
from services.tools_go_equiv.db.schema import documents, facts, kbs
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.kb.embed import EmbedderUnavailable, LocalEmbedder
from services.tools_go_equiv.kb.facts import normalize
from services.tools_go_equiv.registry import ADDS_ONCE, DELETES, READS, registry
from services.tools_go_equiv.tools.common import Caller, UserArgs, caller_of, user_of
from shared.bus.tools import ToolContext, ToolFailure

KB_REF = Field(min_length=1, max_length=200, description="knowledge base name or id")


def find_kb_for(conn: Connection, caller: Caller, ref: str) -> Any:
    """The caller's own KB by id or name; for an admin, else any user's KB by id (names are only
    unique per user, so another user's KB is never picked by name)."""
    own = store.find_kb(conn, caller.user, ref)
    if own is not None or not caller.admin:
        return own
    return store.get_kb(conn, ref)


async def resolve_kb(caller: Caller, ref: str, grouped: bool = False) -> Any:
    """`grouped`: looked up in the transaction the concurrent writes share (`Db.run_grouped`)
    instead of a read transaction of its own, for a path that writes next anyway."""
    db = runtime.get().db
    kb = await (db.run_grouped if grouped else db.read)(find_kb_for, caller, ref)
    if kb is None:
        raise ToolFailure("not_found", f"knowledge base {ref!r} not found")
    return kb


def kb_item(row: Any) -> dict[str, Any]:
    """A KB as tools answer it: the public fields plus its owner."""
    return {**store.kb_public(row), "user_id": row.user_id}


class KbCreateArgs(UserArgs):
    name: str = Field(min_length=1, max_length=100, description="unique per user")
    description: str = Field(default="", max_length=2000)


@registry.tool(
    name="kb_create",
    title="Create a knowledge base",
    description="Create an empty knowledge base.",
    agent=False,
    inject=("user_id",),
    annotations=ADDS_ONCE,
)
async def kb_create(args: KbCreateArgs, ctx: ToolContext) -> dict[str, Any]:
    user = user_of(args, ctx)
    if not store.NAME.match(args.name) or re.fullmatch(r"kb_[0-9a-f]{20}", args.name):
        raise ToolFailure(
            "bad_arguments", "name: letters, digits, space, '_', '.', '-' (starting with a letter or digit)"
        )
    rt = runtime.get()
    embedder = rt.embedders.default
    dim = embedder.dim if isinstance(embedder, LocalEmbedder) else 0
    row = await rt.db.run(store.create_kb, user, args.name, args.description, embedder.name, dim)
    if row is None:
        raise ToolFailure("conflict", f"a knowledge base named {args.name!r} already exists")
    return kb_item(row)


def list_kbs(conn: Connection, owner: str | None) -> list[dict[str, Any]]:
    """KBs with their ready-document counts: one owner's, or everyone's (owner None)."""
    counts = (
        select(documents.c.kb_id, func.count().label("n"))
        .where(documents.c.status == store.READY)
        .group_by(documents.c.kb_id)
        .subquery()
    )
    q = (
        select(kbs, func.coalesce(counts.c.n, 0).label("documents"))
        .outerjoin(counts, counts.c.kb_id == kbs.c.id)
        .order_by(kbs.c.name, kbs.c.user_id)
    )
    if owner is not None:
        q = q.where(kbs.c.user_id == owner)
    return [{**kb_item(r), "documents": r.documents} for r in conn.execute(q).all()]


@registry.tool(
    name="kb_list",
    title="List knowledge bases",
    description="The caller's knowledge bases.",
    inject=("user_id",),
    annotations=READS,
)
async def kb_list(args: UserArgs, ctx: ToolContext) -> dict[str, Any]:
    return {"items": await runtime.get().db.read(list_kbs, caller_of(args, ctx).scope)}


class KbRefArgs(UserArgs):
    kb: str = KB_REF


@registry.tool(
    name="kb_delete",
    title="Delete a knowledge base",
    description="Delete a knowledge base with its documents, chunks, vectors and facts (one transaction).",
    agent=False,
    inject=("user_id",),
    annotations=DELETES,
)
async def kb_delete(args: KbRefArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    rt = runtime.get()
    removed = await rt.db.run(store.delete_kb, kb.id)
    await rt.kb_changed(kb.id, kb.revision + 1, "deleted")
    return {"deleted": kb.id, "name": kb.name, "user_id": kb.user_id, **removed}


class KbSearchArgs(UserArgs):
    kb: str = KB_REF
    query: str = Field(min_length=1, max_length=4000)
    top_k: int = Field(default=5, ge=1, le=50)
    mode: Literal["hybrid", "vector", "fulltext", "graph"] = "hybrid"


@registry.tool(
    name="kb_search",
    title="Search a knowledge base",
    description=(
        "Find the passages of a knowledge base most relevant to a query. mode: hybrid (default; fuses "
        "vector, full-text and entity-graph results), vector, fulltext or graph. Each hit names the "
        "sources that found it."
    ),
    inject=("user_id",),
    annotations=READS,
)
async def kb_search(args: KbSearchArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    rt = runtime.get()
    try:
        embedder = rt.embedders.for_name(kb.embedder)
        hits = await rt.searcher.search(kb, embedder, args.query, args.mode, min(args.top_k, rt.settings.kb_max_top_k))
    except EmbedderUnavailable as exc:
        raise ToolFailure("unavailable", str(exc), retryable=exc.retryable) from exc
    rt.counters["searches"] = rt.counters.get("searches", 0) + 1
    return {"kb": kb.id, "mode": args.mode, "chunks": hits}


class KbGraphArgs(UserArgs):
    kb: str = KB_REF
    entity: str = Field(min_length=1, max_length=300)
    depth: int = Field(default=1, ge=1, le=3)
    limit: int = Field(default=50, ge=1, le=500)


def graph_around(conn: Connection, kb_id: str, entity: str, depth: int, limit: int) -> dict[str, Any]:
    frontier, seen_names = {entity}, {entity}
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for _ in range(depth):
        if not frontier or len(out) >= limit:
            break
        rows = conn.execute(
            select(facts)
            .join(documents, documents.c.id == facts.c.document_id)
            .where(
                facts.c.kb_id == kb_id,
                documents.c.status == "ready",
                facts.c.subject_norm.in_(frontier) | facts.c.object_norm.in_(frontier),
            )
            .order_by(facts.c.id)
            .limit(limit * 4)
        ).all()
        nxt: set[str] = set()
        for r in rows:
            if r.id in seen or len(out) >= limit:
                continue
            seen.add(r.id)
            out.append(
                {
                    "subject": r.subject,
                    "relation": r.relation,
                    "object": r.object,
                    "doc_id": r.document_id,
                    "chunk_id": r.chunk_id,
                }
            )
            nxt |= {r.subject_norm, r.object_norm}
        frontier = nxt - seen_names
        seen_names |= nxt
    suggestions: list[str] = []
    if not out:
        like = f"%{entity}%"
        suggestions = list(
            conn.execute(
                select(facts.c.subject)
                .where(facts.c.kb_id == kb_id, facts.c.subject_norm.like(like))
                .group_by(facts.c.subject)
                .order_by(func.count().desc())
                .limit(10)
            ).scalars()
        )
    return {"facts": out, "entities": sorted(seen_names - {entity}), "suggestions": suggestions}


@registry.tool(
    name="kb_graph",
    title="Facts about an entity",
    description="The entity–relation facts extracted from a knowledge base around one entity (and its neighbours).",
    inject=("user_id",),
    annotations=READS,
)
async def kb_graph(args: KbGraphArgs, ctx: ToolContext) -> dict[str, Any]:
    kb = await resolve_kb(caller_of(args, ctx), args.kb)
    entity = normalize(args.entity)
    if not entity:
        raise ToolFailure("bad_arguments", "entity has no letters or digits")
    result = await runtime.get().db.read(graph_around, kb.id, entity, args.depth, args.limit)
    return {"kb": kb.id, "entity": args.entity, **result}


class WikiSearchArgs(UserArgs):
    query: str = Field(min_length=1, max_length=500)
    kb: str | None = Field(default=None, max_length=200, description="limit to one knowledge base")
    limit: int = Field(default=10, ge=1, le=50)


def title_search(conn: Connection, owner: str | None, kb_id: str | None, terms: list[str], limit: int) -> list[Any]:
    q = (
        select(documents.c.id, documents.c.title, documents.c.kb_id, kbs.c.name.label("kb_name"))
        .join(kbs, kbs.c.id == documents.c.kb_id)
        .where(documents.c.status == "ready")
        .where(or_(*[func.lower(documents.c.title).like(f"%{t}%") for t in terms]))
        .limit(500)
    )
    if owner is not None:
        q = q.where(kbs.c.user_id == owner)
    if kb_id:
        q = q.where(documents.c.kb_id == kb_id)
    rows = conn.execute(q).all()
    scored = sorted(rows, key=lambda r: (-sum(t in r.title.lower() for t in terms), len(r.title), r.id))
    return scored[:limit]


@registry.tool(
    name="wiki_search",
    title="Find pages by title",
    description=(
        "Find documents whose titles match the query across the caller's knowledge bases; returns titles and links."
    ),
    inject=("user_id",),
    annotations=READS,
)
async def wiki_search(args: WikiSearchArgs, ctx: ToolContext) -> dict[str, Any]:
    caller = caller_of(args, ctx)
    kb_id = (await resolve_kb(caller, args.kb)).id if args.kb else None
    terms = [t for t in re.findall(r"\w+", args.query.lower()) if len(t) > 1][:10]
    if not terms:
        return {"pages": []}
    rt = runtime.get()
    rows = await rt.db.read(title_search, caller.scope, kb_id, terms, args.limit)
    base = rt.settings.kb_api_base.rstrip("/")
    return {
        "pages": [
            {
                "title": r.title,
                "doc_id": r.id,
                "kb": r.kb_id,
                "kb_name": r.kb_name,
                "link": f"{base}/kb/{r.kb_id}/documents/{r.id}",
            }
            for r in rows
        ]
    }
