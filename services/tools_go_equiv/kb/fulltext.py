"""Full-text queries: FTS5 + bm25 on SQLite, `tsvector` + `ts_rank_cd` on PostgreSQL. Query
words are reduced to plain tokens joined with OR, so user input can never be query syntax."""

from __future__ import annotations

import re

from sqlalchemy import Connection, text

_STOP = frozenset(
    "a an and are as at be but by for from has have how in into is it its of on or that the their then there "
    "these this to was were what when where which who why will with does do did can about".split()
)


def query_terms(query: str) -> list[str]:
    words = [w for w in re.findall(r"\w+", query.lower()) if w not in _STOP]
    return list(dict.fromkeys(words))[:32]


# Documents being ingested (or failed) are not searchable. Usually none: an uncorrelated subquery
# the planner evaluates once, whatever the table statistics (a join here could go quadratic).
NOT_READY = "SELECT id FROM kb_documents WHERE kb_id = :kb AND status <> 'ready'"


def fulltext_search(conn: Connection, kb_id: str, query: str, limit: int) -> list[tuple[int, float]]:
    terms = query_terms(query)
    if not terms:
        return []
    if conn.dialect.name == "sqlite":
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = conn.execute(
            text(
                "SELECT f.rowid, bm25(kb_chunks_fts, 0.5, 1.0) AS rank FROM kb_chunks_fts f "
                "JOIN kb_chunks c ON c.id = f.rowid "
                f"WHERE kb_chunks_fts MATCH :q AND c.kb_id = :kb AND c.document_id NOT IN ({NOT_READY}) "
                "ORDER BY rank LIMIT :n"
            ),
            {"q": match, "kb": kb_id, "n": limit},
        ).all()
        return [(int(r[0]), -float(r[1])) for r in rows]
    rows = conn.execute(
        text(
            "SELECT c.id, ts_rank_cd(c.tsv, q) AS score FROM kb_chunks c, to_tsquery('english', :q) q "
            f"WHERE c.tsv @@ q AND c.kb_id = :kb AND c.document_id NOT IN ({NOT_READY}) "
            "ORDER BY score DESC, c.id LIMIT :n"
        ),
        {"q": " | ".join(terms), "kb": kb_id, "n": limit},
    ).all()
    return [(int(r[0]), float(r[1])) for r in rows]
