"""Migrations: concurrent `migrate` runs apply the schema once (SQLite file lock, PostgreSQL
advisory lock); the gateway refuses to start on a database at another revision; the CLI's
`user add` sub-command."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

# the chat and schedules tables join `metadata`
import services.gateway.chat.tables
import services.gateway.triggers.tables  # noqa: F401
from services.gateway.app import create_app
from services.gateway.migrate import VERSION_TABLE, SchemaMismatch, alembic_config, head_revision, upgrade
from services.gateway.tables import metadata
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def run_cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.gateway", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def concurrent_migrate(env: dict[str, str], runs: int = 3) -> list[str]:
    procs = [run_cli(env, "migrate") for _ in range(runs)]
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        outputs.append(out)
    return outputs


def assert_applied_once(outputs: list[str], url: str) -> None:
    assert sum("gateway schema migrated" in o for o in outputs) == 1, outputs
    assert sum("already at" in o for o in outputs) == len(outputs) - 1, outputs
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            versions = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
            assert versions == [head_revision()]
            assert conn.execute(text("SELECT count(*) FROM tasks")).scalar() == 0
    finally:
        engine.dispose()


def test_concurrent_migrate_on_sqlite(tmp_path: Path) -> None:
    env = {"AGENTIX_DATA_DIR": str(tmp_path), "AGENTIX_GATEWAY_DB_URL": ""}
    outputs = concurrent_migrate(env)
    assert_applied_once(outputs, f"sqlite:///{tmp_path / 'gateway.db'}")


def test_concurrent_migrate_on_postgres(fresh_pg: str, tmp_path: Path) -> None:
    outputs = concurrent_migrate({"AGENTIX_DATA_DIR": str(tmp_path), "AGENTIX_GATEWAY_DB_URL": fresh_pg})
    assert_applied_once(outputs, fresh_pg)


def test_refuses_to_start_on_schema_mismatch(settings: Settings) -> None:
    with pytest.raises(SchemaMismatch, match="never migrated"):
        create_app(settings)
    upgrade(settings)
    engine = create_engine(settings.db_url("gateway"))
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'ffff'"))
    engine.dispose()
    with pytest.raises(SchemaMismatch, match="revision ffff"):
        create_app(settings)
    # The server entry point says so and exits non-zero instead of serving.
    env = {"AGENTIX_DATA_DIR": str(settings.data_dir), "AGENTIX_NATS_SERVERS": settings.nats_servers[0]}
    proc = run_cli(env, "--port", "0")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "run `agentix migrate`" in out


def test_user_add_subcommand(tmp_path: Path) -> None:
    env = {"AGENTIX_DATA_DIR": str(tmp_path), "AGENTIX_GATEWAY_DB_URL": ""}
    assert run_cli(env, "migrate").wait(60) == 0
    proc = run_cli(env, "user", "add", "zoe", "--admin", "--password", "s3cret-pass")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "zoe (admin)" in out
    short = run_cli(env, "user", "add", "yan", "--password", "short")
    out, _ = short.communicate(timeout=60)
    assert short.returncode == 2 and "at least 8" in out
    engine = create_engine(f"sqlite:///{tmp_path / 'gateway.db'}")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT role, password_hash FROM users WHERE id = 'zoe'")).one()
    engine.dispose()
    assert row[0] == "admin" and row[1].startswith("scrypt$") and "s3cret-pass" not in row[1]


def test_the_migrations_build_exactly_the_tables_the_code_declares(settings: Settings) -> None:
    """What `alembic revision --autogenerate` would write after the head: nothing (the chat
    tables included), so the migrations and the table classes never drift apart."""
    upgrade(settings)
    engine = create_engine(settings.db_url("gateway"))
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def _migration(folder: Path, revision: str, down: str | tuple[str, ...] | None) -> None:
    (folder / f"{revision}_step.py").write_text(textwrap.dedent(f"""
        from alembic import op

        revision: str = {revision!r}
        down_revision = {down!r}


        def upgrade() -> None:
            op.execute("SELECT 1")
    """))


def test_the_head_read_from_the_migration_files_is_alembics(tmp_path: Path) -> None:
    """The serving gateway reads the head revision without alembic: it must find what alembic finds,
    through a merge, and refuse a history with two heads."""
    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
    versions = tmp_path / "versions"
    versions.mkdir()
    for revision, down in [("a1", None), ("b2", "a1"), ("c3", "a1"), ("d4", ("b2", "c3"))]:
        _migration(versions, revision, down)
    assert head_revision(versions) == "d4" == ScriptDirectory(str(tmp_path)).get_current_head()
    _migration(versions, "e5", "d4")
    _migration(versions, "f6", "d4")
    assert sorted(ScriptDirectory(str(tmp_path)).get_heads()) == ["e5", "f6"]
    with pytest.raises(RuntimeError, match="2 heads"):
        head_revision(versions)
