"""Vector search with numpy over one cached matrix per KB.

An entry is valid for one KB revision. Every replica drops an entry when it hears
`P.kb.changed.<kb>` (so memory is released and the next search reloads), and a search that
finds a newer revision than its entry reloads anyway — a missed message cannot serve stale rows."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Connection, select

from services.tools_go_equiv.db.engine import Db
from services.tools_go_equiv.db.schema import chunks, documents, embeddings

if TYPE_CHECKING:
    import numpy as np  # imported where it computes, on the first search (see kb/embed.py)


@dataclass(frozen=True)
class Entry:
    revision: int
    ids: np.ndarray  # chunk ids, int64
    matrix: np.ndarray  # (n, dim) float32, rows L2-normalised


def load_matrix(conn: Connection, kb_id: str) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    rows = conn.execute(
        select(embeddings.c.chunk_id, embeddings.c.vector)
        .join(chunks, chunks.c.id == embeddings.c.chunk_id)
        .join(documents, documents.c.id == chunks.c.document_id)
        .where(embeddings.c.kb_id == kb_id, documents.c.status == "ready")
        .order_by(embeddings.c.chunk_id)
    ).all()
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
    return ids, matrix


class VectorCache:
    """At most `max_rows` vectors in memory: the least recently searched KBs are dropped first."""

    def __init__(self, db: Db, max_rows: int = 2_000_000) -> None:
        self.db = db
        self.max_rows = max_rows
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self.loads = 0
        self.invalidations = 0

    def invalidate(self, kb_id: str) -> None:
        self.invalidations += 1
        self._entries.pop(kb_id, None)

    def stats(self) -> dict[str, int]:
        return {
            "kbs": len(self._entries),
            "rows": int(sum(len(e.ids) for e in self._entries.values())),
            "loads": self.loads,
            "invalidations": self.invalidations,
        }

    async def entry(self, kb_id: str, revision: int) -> Entry:
        cached = self._entries.get(kb_id)
        if cached is not None and cached.revision >= revision:
            self._entries.move_to_end(kb_id)
            return cached
        lock = self._locks.setdefault(kb_id, asyncio.Lock())
        async with lock:
            cached = self._entries.get(kb_id)
            if cached is not None and cached.revision >= revision:
                return cached
            ids, matrix = await self.db.read(load_matrix, kb_id)
            self.loads += 1
            return self.remember(kb_id, Entry(revision, ids, matrix))

    def remember(self, kb_id: str, entry: Entry) -> Entry:
        """Keep `entry` as the most recent; drop the least recently used over the row budget."""
        self._entries[kb_id] = entry
        self._entries.move_to_end(kb_id)
        while len(self._entries) > 1 and sum(len(e.ids) for e in self._entries.values()) > self.max_rows:
            self._entries.popitem(last=False)
        return entry

    async def search(self, kb_id: str, revision: int, query: np.ndarray, limit: int) -> list[tuple[int, float]]:
        entry = await self.entry(kb_id, revision)
        if not len(entry.ids) or entry.matrix.shape[1] != query.shape[0]:
            return []
        import numpy as np

        scores = entry.matrix @ query
        k = min(limit, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(entry.ids[i]), float(scores[i])) for i in top]
