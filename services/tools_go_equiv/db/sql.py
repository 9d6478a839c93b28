"""Hot-path statements on the DB-API cursor of a SQLAlchemy connection (same transaction).

Building SQLAlchemy Core statements costs ~0.2–0.3 ms each in Python, which dominated ingestion;
these few statements are plain SQL written once with `:name` parameters (rewritten to psycopg's
`%(name)s` on PostgreSQL)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

_NAMED = re.compile(r"(?<![:\w]):(\w+)")


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
