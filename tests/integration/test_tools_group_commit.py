"""Group commit in the tools database: concurrent registrations share one transaction, each
caller still gets its own answer once its rows are durable (a duplicate, a failure of its own),
and a drain commits what is queued and refuses more — on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Connection, func, select

from services.tools_go_equiv.db import Db, create_schema
from services.tools_go_equiv.db.schema import documents
from services.tools_go_equiv.kb import store
from shared.errors import AgentixError
from shared.group_commit import GroupCommitClosed
from shared.settings import Settings


class Refused(AgentixError):
    code = "bad_arguments"


@pytest.fixture
async def db(backend: Settings) -> AsyncIterator[Db]:
    database = Db(backend.db_url("tools"))
    await asyncio.to_thread(create_schema, database)
    yield database
    await database.group.drain()
    database.close()


def register(kb_id: str, text: str) -> Any:
    digest = hashlib.sha256(text.encode()).hexdigest()

    def write(conn: Connection) -> store.Registered:
        return store.register_document(conn, kb_id, "u1", "", "d.md", "text/markdown", digest, len(text))

    return write


def committed_documents(db: Db, kb_id: str) -> int:
    """Counted on a connection of its own: only committed rows."""
    with db.engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(documents.c.kb_id == kb_id)).scalar_one())


async def test_concurrent_writes_share_one_transaction(db: Db) -> None:
    kb = await db.run(store.create_kb, "u1", "group", "", "local", 8)
    texts = [f"document {i}" for i in range(20)] + ["document 3"]  # the last repeats one
    groups_before = db.group.groups
    regs = await asyncio.gather(*(db.run_grouped(register(kb.id, t)) for t in texts))
    # All were queued before the writer first ran, so they went in one transaction.
    assert db.group.groups - groups_before == 1
    assert [r.duplicate for r in regs] == [False] * 20 + [True]
    assert regs[-1].document_id == regs[3].document_id  # the repeat names the first's document
    assert len({r.job_id for r in regs[:20]}) == 20
    assert committed_documents(db, kb.id) == 20  # durable when the callers got their answers


async def test_a_failing_write_fails_alone(db: Db) -> None:
    kb = await db.run(store.create_kb, "u1", "failing", "", "local", 8)

    def refuse(conn: Connection) -> None:
        register(kb.id, "written, then rolled back")(conn)
        raise Refused("this one is refused")

    outcomes = await asyncio.gather(
        db.run_grouped(register(kb.id, "first")),
        db.run_grouped(refuse),
        db.run_grouped(register(kb.id, "second")),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], Refused)
    assert [type(outcomes[i]) for i in (0, 2)] == [store.Registered, store.Registered]
    assert committed_documents(db, kb.id) == 2  # the refused write left nothing behind


async def test_drain_commits_what_is_queued_and_refuses_more(db: Db) -> None:
    kb = await db.run(store.create_kb, "u1", "drain", "", "local", 8)
    # gather starts its tasks in order: the five writes are queued before the drain begins.
    outcomes = await asyncio.gather(*(db.run_grouped(register(kb.id, f"queued {i}")) for i in range(5)),
                                    db.group.drain())  # fmt: skip
    assert all(isinstance(r, store.Registered) for r in outcomes[:5])
    assert committed_documents(db, kb.id) == 5
    with pytest.raises(GroupCommitClosed):
        await db.run_grouped(register(kb.id, "too late"))


async def test_a_cancelled_caller_s_write_still_commits(db: Db) -> None:
    kb = await db.run(store.create_kb, "u1", "cancelled", "", "local", 8)
    caller = asyncio.ensure_future(db.run_grouped(register(kb.id, "kept")))
    # Callbacks run in the order they were scheduled: the caller queues its write, then is cancelled.
    asyncio.get_running_loop().call_soon(caller.cancel)
    with pytest.raises(asyncio.CancelledError):
        await caller
    await db.group.drain()
    assert committed_documents(db, kb.id) == 1
