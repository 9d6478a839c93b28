"""The tools database: SQLAlchemy Core on SQLite (embedded) or PostgreSQL (psycopg 3).

Work runs in worker threads (`Db.run`). SQLite writers take the write lock up front
(`BEGIN IMMEDIATE`) so two processes never deadlock upgrading a read lock."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

P = ParamSpec("P")
READONLY = "agentix_readonly"
T = TypeVar("T")


def normalize_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=16)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 60})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        # We issue BEGIN ourselves (below), so the driver must not.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # Readers need no lock under WAL; writers take the write lock at once.
        readonly = conn.get_execution_options().get(READONLY, False)
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


class Db:
    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(self.url)
        self.dialect = self.engine.dialect.name  # "sqlite" | "postgresql"
        self._write_lock: AbstractContextManager[Any] = threading.Lock() if self.is_sqlite else nullcontext()

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextmanager
    def tx(self) -> Iterator[Connection]:
        # SQLite has one writer at a time and its busy handler waits by sleeping (up to 100 ms a
        # try): writers of this process queue on a lock instead and only other processes ever
        # meet the busy handler.
        with self._write_lock, self.engine.begin() as conn:
            yield conn

    async def run(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(conn, *args)` in a worker thread, in one transaction committed on return."""

        def call() -> T:
            with self.tx() as conn:
                return fn(conn, *args, **kwargs)

        return await asyncio.to_thread(call)

    @contextmanager
    def read_tx(self) -> Iterator[Connection]:
        with self.engine.connect().execution_options(**{READONLY: True}) as conn, conn.begin():
            yield conn

    async def read(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Like `run`, for work that only reads."""

        def call() -> T:
            with self.read_tx() as conn:
                return fn(conn, *args, **kwargs)

        return await asyncio.to_thread(call)

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    def close(self) -> None:
        self.engine.dispose()
