"""The tools database: SQLAlchemy Core on SQLite (embedded) or PostgreSQL (psycopg 3).

Work runs in worker threads (`Db.run`). SQLite writers take the write lock up front
(`BEGIN IMMEDIATE`) so two processes never deadlock upgrading a read lock."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection

from shared.db import READONLY, make_engine, normalize_url
from shared.group_commit import GroupCommit

P = ParamSpec("P")
T = TypeVar("T")


class Db:
    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(self.url, immediate_writes=True, busy_timeout_s=60)
        self.dialect = self.engine.dialect.name  # "sqlite" | "postgresql"
        self._write_lock: AbstractContextManager[Any] = threading.Lock() if self.is_sqlite else nullcontext()
        # Small writes of concurrent callers (a document's registration, a job's state) share commits.
        self.group = GroupCommit(self.tx)

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

    async def run_grouped(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Like `run`, in a transaction shared with the concurrent callers' (`GroupCommit`): for
        small writes whose `fn` only runs statements (it may run twice, the first time rolled back)."""
        return await self.group.run(fn, *args, **kwargs)

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
