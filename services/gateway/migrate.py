"""Schema migrations (alembic). `upgrade` applies them once even when several processes run it at
the same time (PostgreSQL advisory lock, a file lock for SQLite). A serving gateway does not import
this module: `schema_version.check_schema` makes it refuse a database behind or ahead of the code."""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Alembic narrates every plugin it loads at INFO, and it loads them when it is first imported:
# quieten that logger before the import. Of its migration lines only "Running upgrade …" says
# something to an operator; the two it writes on every connection ("Context impl SQLiteImpl.",
# "Will assume non-transactional DDL.") are dropped.
logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
_CONNECTION_NARRATION = ("Context impl ", "Will assume ")
logging.getLogger("alembic.runtime.migration").addFilter(
    lambda record: not str(record.msg).startswith(_CONNECTION_NARRATION)
)

from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402
from sqlalchemy import Connection, Engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from services.gateway.schema_version import (  # noqa: E402
    VERSION_TABLE,
    SchemaMismatch,
    check_schema,
    current_revision,
    head_revision,
)
from shared.settings import GatewaySettings  # noqa: E402

__all__ = ["VERSION_TABLE", "SchemaMismatch", "check_schema", "head_revision", "upgrade", "upgrade_engine"]

log = logging.getLogger("agentix.gateway.migrate")

ADVISORY_LOCK_KEY = 0x61676E7478  # "agntx": any constant shared by every gateway process
MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(url: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@contextmanager
def _sqlite_file_lock(url: str) -> Iterator[None]:
    database = make_url(url).database
    if not database or database == ":memory:":
        yield
        return
    lock_path = Path(database).with_suffix(".migrate.lock")
    with lock_path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def upgrade_engine(engine: Engine) -> str:
    """Bring the database to the head revision; returns it. Safe to run concurrently."""
    url = engine.url.render_as_string(hide_password=False)
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            # Session-level lock: a second migrator waits here, then finds nothing to do.
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
            conn.commit()
            try:
                _upgrade_on(conn, url)
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_LOCK_KEY})
                conn.commit()
    else:
        with _sqlite_file_lock(url), engine.connect() as conn:
            _upgrade_on(conn, url)
    return head_revision()


def _upgrade_on(conn: Connection, url: str) -> None:
    before = current_revision(conn)
    if before == head_revision():
        log.info("gateway schema already at %s", before)
        return
    cfg = alembic_config(url)
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
    conn.commit()
    log.info("gateway schema migrated %s -> %s", before, head_revision())


def upgrade(settings: GatewaySettings) -> str:
    from shared.db import make_engine

    engine = make_engine(settings.db_url("gateway"))
    try:
        return upgrade_engine(engine)
    finally:
        engine.dispose()
