"""Database engines for the services that own tables: SQLite embedded (WAL, one file per owner),
PostgreSQL through psycopg 3 in production."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

READONLY = "agentix_readonly"


def normalize_url(url: str) -> str:
    """`postgresql://…` → the psycopg 3 driver; everything else unchanged."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, *, immediate_writes: bool = False, busy_timeout_s: int = 30) -> Engine:
    """With `immediate_writes`, a SQLite transaction takes the write lock at BEGIN unless the
    connection is marked READONLY, so two processes never deadlock upgrading a read lock."""
    url = normalize_url(url)
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=16)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": busy_timeout_s})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        if immediate_writes:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        # WAL lets readers run while a writer commits.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={busy_timeout_s * 1000}")
        cur.close()

    if immediate_writes:

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            readonly = conn.get_execution_options().get(READONLY, False)
            conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine
