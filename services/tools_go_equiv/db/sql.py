"""Hot-path statements on the DB-API cursor of a SQLAlchemy connection (same transaction).

Building SQLAlchemy Core statements costs ~0.2–0.3 ms each in Python, which dominated ingestion;
these few statements are plain SQL written once with `:name` parameters (rewritten to psycopg's
`%(name)s` on PostgreSQL)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

from services.tools_go_equiv.ids import now

_NAMED = re.compile(r"(?<![:\w]):(\w+)")
# Bound parameters per multi-row statement: below SQLite's 32,766 and PostgreSQL's 65,535.
VALUES_PARAMS = 30_000
VALUES_ROWS = 1_000


@lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


class Sql:
    def __init__(self, conn: Connection) -> None:
        self.pg = conn.dialect.name != "sqlite"
        self.cur = conn.connection.cursor()

    def _q(self, sql: str) -> str:
        return _pg(sql) if self.pg else sql

    def ts(self, value: datetime) -> Any:
        """A timestamp as this driver stores it (SQLAlchemy's SQLite format: naive UTC text)."""
        return value if self.pg else value.strftime("%Y-%m-%d %H:%M:%S.%f")

    def for_update(self, sql: str) -> str:
        return f"{sql} FOR UPDATE" if self.pg else sql

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        self.cur.execute(self._q(sql), dict(params or {}))
        return self.cur

    def executemany(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        rows = list(rows)
        if rows:
            self.cur.executemany(self._q(sql), rows)

    def one(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[Any, ...] | None:
        return self.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        row = self.one(sql, params)
        return row[0] if row else None

    def values(self, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> list[tuple[Any, ...]]:
        """`head VALUES (…), (…), … tail` — many rows per statement (one parse and one round trip
        for up to VALUES_ROWS rows, on both drivers). Returns the rows of a RETURNING tail."""
        out: list[tuple[Any, ...]] = []
        if not rows:
            return out
        mark = "%s" if self.pg else "?"
        group = f"({', '.join([mark] * len(rows[0]))})"
        step = max(1, min(VALUES_ROWS, VALUES_PARAMS // len(rows[0])))
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            self.cur.execute(f"{head} VALUES {', '.join([group] * len(part))} {tail}", [v for row in part for v in row])
            if tail and "RETURNING" in tail:
                out.extend(self.cur.fetchall())
        return out

    def in_list(self, name: str, values: Iterable[Any]) -> tuple[str, dict[str, Any]]:
        """`(:name0, :name1, …)` and its parameters, for `WHERE x IN …` with named parameters."""
        params = {f"{name}{i}": v for i, v in enumerate(values)}
        return f"({', '.join(':' + k for k in params) or 'NULL'})", params


def update_row(conn: Connection, table: str, columns: frozenset[str], row_id: str, values: Mapping[str, Any]) -> None:
    """`UPDATE table SET <values>, updated_at = now WHERE id = row_id`; only the named columns may
    be set (the column names go into the SQL text)."""
    unknown = set(values) - columns
    if unknown:
        raise ValueError(f"not {table} columns: {unknown}")
    sql = Sql(conn)
    assignments = ", ".join(f"{k} = :{k}" for k in sorted(values))
    sql.execute(
        f"UPDATE {table} SET {assignments}, updated_at = :updated_at WHERE id = :id",
        {**values, "updated_at": sql.ts(now()), "id": row_id},
    )

