"""The gateway's database: one SQLAlchemy engine (SQLite embedded, PostgreSQL via psycopg) and a
way to run blocking ORM work off the event loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from anyio import to_thread
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlmodel import Session

P = ParamSpec("P")
T = TypeVar("T")


def normalize_url(url: str) -> str:
    """`postgresql://…` → the psycopg 3 driver; everything else unchanged."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            # WAL lets the SSE/status readers run while the recorder writes.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


class Database:
    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.engine = make_engine(url)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def _in_session(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self.session() as session:
            result = fn(session, *args, **kwargs)
            session.commit()
            return result

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn(session, *args)` in a worker thread inside one transaction (committed on return)."""
        return await to_thread.run_sync(lambda: self._in_session(fn, *args, **kwargs))

    def ping(self) -> None:
        with self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    def close(self) -> None:
        self.engine.dispose()
