"""kb_search: vector, full-text, graph, and hybrid = reciprocal rank fusion of the three, reranked
when a reranker is configured.

Each hit says which sources found it (`sources: {vector?, fulltext?, graph?, rerank?}` with that
source's rank and score), so a caller can see why a chunk came back."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any, Literal

from sqlalchemy import Connection, select, text

from services.tools_go_equiv.db.engine import Db
from services.tools_go_equiv.db.schema import chunks, documents
from services.tools_go_equiv.kb.embed import Embedder
from services.tools_go_equiv.kb.facts import query_entities
from services.tools_go_equiv.kb.fulltext import NOT_READY, fulltext_search
from services.tools_go_equiv.kb.rerank import Reranker, RerankError
from services.tools_go_equiv.kb.vectors import VectorCache

log = logging.getLogger("agentix.tools_go.search")
Mode = Literal["vector", "fulltext", "graph", "hybrid"]
Ranked = list[tuple[int, float]]


def graph_search(conn: Connection, kb_id: str, names: list[str], limit: int) -> Ranked:
    """Chunks holding facts about the entities named in the query. A fact scores the number of
    words of each query entity it touches (specific multi-word names count more). Aggregated in
    SQL; each side of a fact is found through its (kb, name) index with an IN list."""
    if not names:
        return []
    params: dict[str, Any] = {"kb": kb_id, "limit": limit}
    for i, name in enumerate(names):
        params[f"n{i}"], params[f"w{i}"] = name, len(name.split())
    listed = ", ".join(f":n{i}" for i in range(len(names)))

    def side(column: str) -> str:
        weight = " ".join(f"WHEN :n{i} THEN :w{i}" for i in range(len(names)))
        return (
            f"SELECT chunk_id, CASE {column} {weight} ELSE 0 END AS w FROM kb_facts "
            f"WHERE kb_id = :kb AND {column} IN ({listed}) AND document_id NOT IN ({NOT_READY})"
        )

    rows = conn.execute(
        text(
            f"SELECT chunk_id, SUM(w) AS score FROM ({side('subject_norm')} UNION ALL {side('object_norm')}) hits "
            "GROUP BY chunk_id ORDER BY score DESC, chunk_id LIMIT :limit"
        ),
        params,
    ).all()
    return [(int(r[0]), float(r[1])) for r in rows]


def fetch_chunks(conn: Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    rows = conn.execute(
        select(chunks.c.id, chunks.c.text, chunks.c.heading, chunks.c.position, chunks.c.document_id, documents.c.title)
        .join(documents, documents.c.id == chunks.c.document_id)
        .where(chunks.c.id.in_(ids))
    ).all()
    return {
        int(r.id): {
            "chunk_id": int(r.id),
            "text": r.text,
            "heading": r.heading,
            "position": r.position,
            "doc_id": r.document_id,
            "title": r.title,
        }
        for r in rows
    }


Fused = tuple[int, float, dict[str, Any]]


def reciprocal_rank_fusion(lists: dict[str, Ranked], k: int) -> list[Fused]:
    fused: dict[int, float] = defaultdict(float)
    found: dict[int, dict[str, Any]] = defaultdict(dict)
    for source, ranked in lists.items():
        for rank, (chunk_id, score) in enumerate(ranked, start=1):
            fused[chunk_id] += 1.0 / (k + rank)
            found[chunk_id][source] = {"rank": rank, "score": round(score, 6)}
    # Ties: more sources first, then the smaller chunk id (stable across runs).
    order = sorted(fused, key=lambda c: (-fused[c], -len(found[c]), c))
    return [(c, fused[c], found[c]) for c in order]


class Searcher:
    def __init__(
        self, db: Db, vectors: VectorCache, rrf_k: int = 60, reranker: Reranker | None = None, rerank_depth: int = 30
    ) -> None:
        self.db = db
        self.vectors = vectors
        self.rrf_k = rrf_k
        self.reranker = reranker
        self.rerank_depth = rerank_depth

    async def _vector(self, kb: Any, embedder: Embedder, query: str, depth: int) -> Ranked:
        q = (await embedder.embed([query]))[0]
        if not q.any():
            return []
        return await self.vectors.search(kb.id, kb.revision, q, depth)

    async def search(self, kb: Any, embedder: Embedder, query: str, mode: Mode, top_k: int) -> list[dict[str, Any]]:
        depth = max(top_k * 4, 20)
        runs: dict[str, Any] = {}
        if mode in ("vector", "hybrid"):
            runs["vector"] = self._vector(kb, embedder, query, depth)
        if mode in ("fulltext", "hybrid"):
            runs["fulltext"] = self.db.read(fulltext_search, kb.id, query, depth)
        if mode in ("graph", "hybrid"):
            runs["graph"] = self.db.read(graph_search, kb.id, query_entities(query), depth)
        results = dict(zip(runs, await asyncio.gather(*runs.values()), strict=True))
        if mode == "hybrid":
            fused = reciprocal_rank_fusion(results, self.rrf_k)
            ranked = fused[: max(top_k, self.rerank_depth)] if self.reranker else fused[:top_k]
        else:
            ranked = [
                (cid, score, {mode: {"rank": i, "score": round(score, 6)}})
                for i, (cid, score) in enumerate(results[mode][:top_k], start=1)
            ]
        rows = await self.db.read(fetch_chunks, [cid for cid, _, _ in ranked])
        ranked = [r for r in ranked if r[0] in rows]
        if mode == "hybrid" and self.reranker:
            ranked = await self._rerank(query, ranked, rows)
        return [{**rows[cid], "score": round(score, 6), "sources": sources} for cid, score, sources in ranked[:top_k]]

    async def _rerank(self, query: str, ranked: list[Fused], rows: dict[int, dict[str, Any]]) -> list[Fused]:
        """Reorder the fused candidates by the reranker; on its failure keep the fusion order."""
        assert self.reranker is not None
        try:
            scores = await self.reranker.scores(query, [rows[cid]["text"] for cid, _, _ in ranked])
        except RerankError as exc:
            log.warning("%s; keeping the fused order", exc)
            return ranked
        order = sorted(range(len(ranked)), key=lambda i: -scores[i])
        return [
            (ranked[i][0], scores[i], {**ranked[i][2], "rerank": {"rank": pos, "score": round(scores[i], 6)}})
            for pos, i in enumerate(order, start=1)
        ]
