"""Ownership scoping of the tools_go_equiv tools: who a call acts as (the admin flag only from the
request metadata), and the scoped queries on a real SQLite and PostgreSQL database."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from services.tools_go_equiv.db.engine import Db
from services.tools_go_equiv.db.schema import create_schema, reports
from services.tools_go_equiv.ids import now
from services.tools_go_equiv.kb import store
from services.tools_go_equiv.tools.common import Caller, UserArgs, caller_of, user_of
from services.tools_go_equiv.tools.documents import visible_job
from services.tools_go_equiv.tools.kb import KbRefArgs, find_kb_for, list_kbs, title_search
from services.tools_go_equiv.tools.report import _get as get_report
from services.tools_go_equiv.tools.report import _list as list_reports
from shared.bus.tools import ToolContext, ToolFailure
from shared.contract.tools import ToolMeta, ToolRequest

ALICE, BOB, ROOT = Caller("alice"), Caller("bob"), Caller("root", admin=True)


def ctx(**meta: Any) -> ToolContext:
    return ToolContext(meta=ToolMeta(**meta), bus=None)  # type: ignore[arg-type]


def test_admin_is_off_unless_the_metadata_says_so() -> None:
    assert ToolMeta().admin is False
    request = ToolRequest.model_validate_json('{"args": {"admin": true}, "meta": {"user_id": "bob"}}')
    assert request.meta.admin is False
    assert ToolMeta.from_bytes(ToolMeta(user_id="root", admin=True).to_bytes()).admin is True
    # `admin` in the arguments is not a field of any tool's arguments: it is dropped.
    args = KbRefArgs.model_validate({"kb": "x", "admin": True, "user_id": "bob"})
    assert "admin" not in args.model_dump() and caller_of(args, ctx(user_id="bob")) == BOB


def test_who_a_call_acts_as() -> None:
    assert caller_of(UserArgs(), ctx(user_id="alice")) == ALICE
    assert caller_of(UserArgs(user_id="root"), ctx(user_id="root", admin=True)) == ROOT
    assert caller_of(UserArgs(user_id="alice"), ctx()) == ALICE  # no metadata user: the injected one
    with pytest.raises(ToolFailure) as anonymous:
        user_of(UserArgs(), ctx())
    assert anonymous.value.code == "bad_arguments"
    with pytest.raises(ToolFailure) as other:
        user_of(UserArgs(user_id="alice"), ctx(user_id="bob"))
    assert other.value.code == "forbidden"
    # The gateway, for an admin, names the user whose memory it works on.
    assert user_of(UserArgs(user_id="alice"), ctx(user_id="root", admin=True)) == "alice"
    assert ROOT.scope is None and ALICE.scope == "alice"
    assert ROOT.may_act_on("alice") and ALICE.may_act_on("alice") and not BOB.may_act_on("alice")


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    url = f"sqlite:///{tmp_path / 'tools.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    database = Db(url)
    create_schema(database)
    yield database
    database.close()


def test_kb_scoping(db: Db) -> None:
    # The PostgreSQL database is shared by the run: names unique to this test.
    tag = uuid.uuid4().hex[:8]
    alice, bob, root = Caller(f"alice-{tag}"), Caller(f"bob-{tag}"), Caller(f"root-{tag}", admin=True)
    with db.tx() as conn:
        alice_kb = store.create_kb(conn, alice.user, "handbook", "", "local", 8)
        root_kb = store.create_kb(conn, root.user, "ops", "", "local", 8)
        doc = store.register_document(conn, alice_kb.id, alice.user, f"Vacation {tag}", None, None, tag, 10)
        store.set_document(conn, doc.document_id, status="ready", chunks=1)
    with db.tx() as conn:
        everyone = [k for k in list_kbs(conn, None) if k["user_id"].endswith(tag)]
        assert [(k["name"], k["user_id"], k["documents"]) for k in everyone] == [
            ("handbook", alice.user, 1),
            ("ops", root.user, 0),
        ]
        assert [k["id"] for k in list_kbs(conn, alice.user)] == [alice_kb.id]
        assert list_kbs(conn, bob.user) == []

        assert find_kb_for(conn, alice, "handbook").id == alice_kb.id
        assert find_kb_for(conn, bob, alice_kb.id) is None and find_kb_for(conn, bob, "handbook") is None
        assert find_kb_for(conn, root, alice_kb.id).id == alice_kb.id  # an admin: any KB by id
        assert find_kb_for(conn, root, "handbook") is None  # ... but only its own by name
        assert find_kb_for(conn, root, "ops").id == root_kb.id

        assert [r.id for r in title_search(conn, None, None, [tag], 10)] == [doc.document_id]
        assert title_search(conn, bob.user, None, [tag], 10) == []
        assert [r.id for r in title_search(conn, alice.user, None, [tag], 10)] == [doc.document_id]

        assert visible_job(conn, alice, doc.job_id) is not None
        assert visible_job(conn, root, doc.job_id) is not None
        assert visible_job(conn, bob, doc.job_id) is None
        assert visible_job(conn, root, "job_missing") is None


def test_report_scoping(db: Db) -> None:
    ts = now()
    # Ids sort after every generated one (`rep_` + hex): the newest-first list starts with them.
    tag = uuid.uuid4().hex[:8]
    ids = [f"rep_zzz{tag}{i}" for i in (1, 2, 3)]
    owners = [f"alice-{tag}", f"bob-{tag}", f"alice-{tag}"]
    with db.tx() as conn:
        for report_id, owner in zip(ids, owners, strict=True):
            conn.execute(
                insert(reports).values(id=report_id, user_id=owner, title="t", files=json.dumps({}), created_at=ts,
                                       updated_at=ts)
            )  # fmt: skip
    with db.tx() as conn:
        assert get_report(conn, owners[0], ids[1]) is None
        assert get_report(conn, None, ids[1]).user_id == owners[1]
        rows, cursor = list_reports(conn, None, 2, None)
        assert [r.id for r in rows] == [ids[2], ids[1]] and cursor == ids[1]
        assert list_reports(conn, None, 1, cursor)[0][0].id == ids[0]
        assert [r.id for r in list_reports(conn, owners[0], 10, None)[0]] == [ids[2], ids[0]]
