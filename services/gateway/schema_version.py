"""Which schema revision the database is at and which the code needs, without alembic: a serving
gateway only compares the two at start, and alembic (with mako and pygments behind it, ~10 MB
resident) would stay loaded for that one look. `migrate` applies the migrations with alembic;
a test holds `head_revision` to alembic's own answer."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import Connection, Engine, inspect, text

from shared.errors import AgentixError

VERSION_TABLE = "gateway_alembic_version"
VERSIONS_DIR = Path(__file__).with_name("migrations") / "versions"


class SchemaMismatch(AgentixError, RuntimeError):
    """The database is not at the schema version this code expects (still a RuntimeError for
    callers that catch it as one)."""

    code = "schema_mismatch"
    http_status = 503


# `revision = "0013"`, `down_revision: str | None = None`, `down_revision = ("b2", "c3")`: the
# top-level literals alembic reads. Read as text rather than through `ast.parse`: building Python
# AST objects on CPython 3.11 fails at random ("AST constructor recursion depth mismatch") when a
# garbage collection runs finalizers in the middle of it, and the gateway reads these at start.
_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)
_QUOTED = re.compile(r"""["']([^"']+)["']""")


def _revision_names(path: Path) -> tuple[str, tuple[str, ...]]:
    """A migration file's `revision` and the revisions it follows (`down_revision`: None, one,
    or a tuple for a merge)."""
    found = {name: _QUOTED.findall(value) for name, value in _ASSIGNMENT.findall(path.read_text())}
    if len(found.get("revision", ())) != 1:
        raise RuntimeError(f"{path.name} names no single `revision`")
    return found["revision"][0], tuple(found.get("down_revision", ()))


def head_revision(versions_dir: Path = VERSIONS_DIR) -> str:
    """The newest migration: the one revision that no other migration follows."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in sorted(versions_dir.glob("*.py")):
        revision, parents = _revision_names(path)
        revisions.add(revision)
        followed.update(parents)
    heads = sorted(revisions - followed)
    if len(heads) != 1:
        raise RuntimeError(f"the gateway's migrations have {len(heads)} heads ({', '.join(heads)}); expected one")
    return heads[0]


def current_revision(conn: Connection) -> str | None:
    """The revision the database was migrated to; None when it never was."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:
        raise SchemaMismatch(f"the gateway database is at several revisions at once ({', '.join(sorted(rows))})")
    return rows[0] if rows else None


def check_schema(engine: Engine) -> None:
    """Raise SchemaMismatch unless the database is exactly at the head revision."""
    with engine.connect() as conn:
        current = current_revision(conn)
    head = head_revision()
    if current != head:
        where = "empty (never migrated)" if current is None else f"at revision {current}"
        raise SchemaMismatch(
            f"the gateway database is {where} but this code needs revision {head}; "
            "run `agentix migrate` (or `python -m services.gateway migrate`) first"
        )
