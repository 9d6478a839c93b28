"""Alembic environment for the gateway's tables; run through `services.gateway.migrate`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

# The chat and triggers tables join `metadata`, so autogenerate sees them.
import services.gateway.chat.tables
import services.gateway.triggers.tables  # noqa: F401
from services.gateway.schema_version import VERSION_TABLE
from services.gateway.tables import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,  # SQLite needs batch mode for ALTER
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("alembic needs a connection or sqlalchemy.url to migrate")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()
