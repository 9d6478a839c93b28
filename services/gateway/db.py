"""The gateway's database: one SQLAlchemy engine (SQLite embedded, PostgreSQL via psycopg) and a
way to run blocking ORM work off the event loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from anyio import to_thread
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session, SQLModel, select

from shared.db import make_engine, normalize_url

T = TypeVar("T")


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


M = TypeVar("M", bound=SQLModel)


def get_or_create_locked(session: Session, model: type[M], **key: Any) -> M:
    """The row of `model` with primary key `key`, created with its defaults if missing, and locked
    for the rest of the transaction (PostgreSQL). Creating it with ON CONFLICT DO NOTHING first
    makes two first writers (two replicas) queue on the row instead of one of them failing on
    the primary key."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    table = model.__table__  # type: ignore[attr-defined]
    session.execute(insert(table).values(model(**key).model_dump()).on_conflict_do_nothing())
    return session.exec(select(model).filter_by(**key).with_for_update()).one()
