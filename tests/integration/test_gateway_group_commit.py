"""The gateway's group commit on real databases (SQLite and PostgreSQL), through what the request
path writes with it (audit rows, guardrail events): concurrent rows share one transaction, each
writer returns only once its own row is committed, and a bad row fails alone while its group
neighbours are written."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from services.gateway.audit import AUDIT_LOG, write_audit, write_guardrail_event
from services.gateway.db import Database, insert_row
from services.gateway.migrate import upgrade_engine
from services.gateway.tables import AuditEntry, GuardrailEventRow, now


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path / 'gw.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    database = Database(url)
    upgrade_engine(database.engine)
    with database.session() as s:  # PostgreSQL's database is shared by the run's tests
        for model in (AuditEntry, GuardrailEventRow):
            for row in s.exec(select(model)):
                s.delete(row)
        s.commit()
    yield database
    database.close()


def audit_fields(n: int, **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "user_id": "alice",
        "method": "POST",
        "route": "/mcp",
        "target": f"tool={n}",
        "status": 200,
        "outcome": "ok",
        "request_id": f"r{n}",
        "ip": "127.0.0.1",
    }
    return fields | overrides


def committed(db: Database) -> list[AuditEntry]:
    with db.session() as s:  # a session of its own: sees only what is committed
        return list(s.exec(select(AuditEntry).order_by(AuditEntry.request_id)))  # type: ignore[arg-type]


async def test_concurrent_rows_share_one_transaction(db: Database) -> None:
    await asyncio.gather(*(write_audit(db, **audit_fields(n)) for n in range(20)))
    assert db.group.groups == 1
    rows = committed(db)
    assert sorted(r.request_id or "" for r in rows) == sorted(f"r{n}" for n in range(20))
    assert all(r.id is not None and r.ts is not None for r in rows)


async def test_a_writer_returns_once_its_row_is_committed(db: Database) -> None:
    for n in range(3):  # one after another, as a single client's requests come
        await write_audit(db, **audit_fields(n))
        assert [r.request_id for r in committed(db)] == [f"r{k}" for k in range(n + 1)]
    assert db.group.groups == 3


async def test_a_bad_row_fails_alone(db: Database) -> None:
    outcomes = await asyncio.gather(
        write_audit(db, **audit_fields(0)),
        write_audit(db, **audit_fields(1, method=None)),  # NOT NULL: the database refuses it
        write_audit(db, **audit_fields(2)),
        return_exceptions=True,
    )
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], IntegrityError)
    assert [r.request_id for r in committed(db)] == ["r0", "r2"]


async def test_rows_of_both_tables_go_in_one_transaction(db: Database) -> None:
    await asyncio.gather(write_audit(db, **audit_fields(0)),
                         write_guardrail_event(db, user_id="bob", action="flag", rule="prompt_probe",
                                               reason="matched prompt_probe"))
    assert db.group.groups == 1
    with db.session() as s:
        assert [(e.rule, e.tier) for e in s.exec(select(GuardrailEventRow))] == [("prompt_probe", 1)]
    assert [r.request_id for r in committed(db)] == ["r0"]


async def test_a_row_written_later_goes_with_the_next_group_and_is_committed_on_drain(db: Database) -> None:
    await write_audit(db, wait=False, **audit_fields(0))  # returns before any commit
    await asyncio.gather(write_audit(db, **audit_fields(1)), write_audit(db, **audit_fields(2)))
    await db.drain()
    assert [r.request_id for r in committed(db)] == ["r0", "r1", "r2"]


async def test_a_row_written_later_that_fails_is_logged_and_costs_no_other_row(
        db: Database, caplog: pytest.LogCaptureFixture) -> None:
    db.run_later(insert_row, AUDIT_LOG, {"ts": now(), **audit_fields(0, method=None)})  # NOT NULL: refused
    await write_audit(db, **audit_fields(1))
    await db.drain()
    assert [r.request_id for r in committed(db)] == ["r1"]
    assert "could not be committed" in caplog.text
