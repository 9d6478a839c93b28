"""Control-plane writes are a compare-and-set on the KV revision: a stale writer is refused,
and gateway replicas publishing at once never put an older document after a newer one."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from nats.js.errors import KeyWrongLastSequenceError
from sqlalchemy import Engine, text
from sqlmodel import Session

from services.gateway.admin.control_publisher import CHAIN_KEY, bump, current_chain
from services.gateway.admin.prompts import VersionIn, add_version
from services.gateway.embedded import EmbeddedGateway
from services.gateway.tables import ControlValue
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.contract.models import ControlUpdate
from shared.settings import Settings
from tests.support.wait import eventually


def admin_client(gw: EmbeddedGateway) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'root', admin=True)}"}
    return httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=30)


async def test_put_if_refuses_a_stale_revision_and_broadcasts_only_writes(bus: Bus) -> None:
    plane = ControlPlane(bus)
    sub = await bus.nc.subscribe(bus.subjects.control("prompts"))
    key = "prompts.system"
    first = await plane.put_if(key, {"revision": 1}, 0)
    with pytest.raises(KeyWrongLastSequenceError):
        await plane.put_if(key, {"revision": 7}, 0)  # 0 means "must not exist yet"
    second = await plane.put_if(key, {"revision": 2}, first)
    with pytest.raises(KeyWrongLastSequenceError):
        await plane.put_if(key, {"revision": 3}, first)  # somebody wrote after `first`
    assert await plane.get(key) == ({"revision": 2}, second)

    await (await plane.kv()).delete(key)
    again = await plane.put_if(key, {"revision": 4}, 0)  # a deleted key is created anew
    assert await plane.get(key) == ({"revision": 4}, again)

    updates = [ControlUpdate.model_validate_json((await sub.next_msg(timeout=2)).data) for _ in range(3)]
    assert [(u.revision, u.value["revision"]) for u in updates] == [(first, 1), (second, 2), (again, 4)]
    with pytest.raises(TimeoutError):
        await sub.next_msg(timeout=0.2)  # the refused writes were not broadcast
    await sub.unsubscribe()


async def test_a_replica_with_an_older_view_does_not_overwrite_a_newer_chain(
    settings: Settings, tmp_path: Path
) -> None:
    """Two gateways on one NATS deployment; the second one's database is behind the first's."""
    ahead = await EmbeddedGateway(settings).start()
    behind = await EmbeddedGateway(settings.model_copy(update={"data_dir": tmp_path / "behind"})).start()
    plane = ControlPlane(ahead.app.state.bus)
    try:
        async with admin_client(ahead) as a, admin_client(behind) as b:
            for client in (a, b):
                for name in ("m1", "m2"):
                    assert (
                        await client.post("/api/v1/admin/models", json={"name": name, "model": name})
                    ).status_code == 201
            await a.put("/api/v1/admin/models/chain", json={"active": "m1"})
            await a.put("/api/v1/admin/models/chain", json={"active": "m2", "fallbacks": ["m1"]})
            published = await plane.get(CHAIN_KEY)
            assert published is not None and published[0]["revision"] == 2

            stale = await b.put("/api/v1/admin/models/chain", json={"active": "m1"})  # its revision 1
            assert stale.status_code == 200 and stale.json()["revision"] == 1
            assert await plane.get(CHAIN_KEY) == published, "KV never goes back to an older revision"

            await b.put("/api/v1/admin/models/chain", json={"active": "m1", "fallbacks": ["m2"]})
            await b.put("/api/v1/admin/models/chain", json={"active": "m1"})  # revision 3: newer, published
            now = await plane.get(CHAIN_KEY)
            assert now is not None and (now[0]["revision"], now[0]["active"]) == (3, "m1")
    finally:
        await behind.stop()
        await ahead.stop()


@pytest.fixture
async def replicas(settings: Settings, fresh_pg: str) -> AsyncIterator[list[EmbeddedGateway]]:
    configured = settings.model_copy(update={"gateway_db_url": fresh_pg, "rate_limit_per_min": 100_000})
    started = [await EmbeddedGateway(configured).start() for _ in range(2)]
    yield started
    for gateway in started:
        await gateway.stop()


async def test_concurrent_replicas_publish_chain_revisions_in_order(replicas: list[EmbeddedGateway]) -> None:
    suffix = uuid.uuid4().hex[:6]
    names = [f"cas{i}-{suffix}" for i in range(3)]
    plane = ControlPlane(replicas[0].app.state.bus)
    watcher = await (await plane.kv()).watch(CHAIN_KEY)
    seen: list[tuple[int, int]] = []  # (KV revision, document revision)

    async def collect() -> None:
        async for entry in watcher:
            if entry is not None and entry.value:
                seen.append((entry.revision or 0, int(json.loads(entry.value)["revision"])))

    collector = asyncio.create_task(collect())
    clients = [admin_client(r) for r in replicas]
    try:
        for name in names:
            assert (
                await clients[0].post("/api/v1/admin/models", json={"name": name, "model": name})
            ).status_code == 201

        async def swap(i: int) -> int:
            order = names[i % 3 :] + names[: i % 3]
            resp = await clients[i % 2].put(
                "/api/v1/admin/models/chain", json={"active": order[0], "fallbacks": order[1:]}
            )
            assert resp.status_code == 200, resp.text
            return int(resp.json()["revision"])

        revisions = await asyncio.gather(*(swap(i) for i in range(24)))
        assert len(set(revisions)) == 24, "every write got its own database revision"

        with Session(replicas[0].app.state.db.engine) as session:
            final = current_chain(session)
        assert final is not None and final.revision == max(revisions)
        stored = await plane.get(CHAIN_KEY)
        assert stored is not None
        assert (stored[0]["revision"], stored[0]["active"]) == (final.revision, final.active)
        for _ in range(250):
            if seen and seen[-1][0] == stored[1]:
                break
            await asyncio.sleep(0.02)
        assert seen and seen[-1][0] == stored[1]
        doc_revisions = [doc for _, doc in seen]
        assert doc_revisions == sorted(set(doc_revisions)), f"KV went back to an older chain: {seen}"
    finally:
        collector.cancel()
        await watcher.stop()
        for c in clients:
            await c.aclose()


def backend_pid(session: Session) -> int:
    """The PostgreSQL server process that runs this session's transaction."""
    return int(session.connection().exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


async def second_writer_behind(engine: Engine, first: Session, write: Callable[[Session], int]) -> int:
    """`write` in a second session while `first` holds an uncommitted first write of the same
    row. `first` commits only once PostgreSQL reports the second writer blocked by it, so both
    writers are provably inside the critical section at once (never "probably", after a sleep).
    Returns what `write` returned in the committed second transaction."""
    first.flush()  # the first write has reached the database, as a request's would
    holder = backend_pid(first)
    waiter_pid: concurrent.futures.Future[int] = concurrent.futures.Future()

    def second() -> int:
        with Session(engine) as session:
            try:
                waiter_pid.set_result(backend_pid(session))
            except BaseException as exc:
                waiter_pid.set_exception(exc)
                raise
            result = write(session)
            session.commit()
            return result

    racing = asyncio.create_task(asyncio.to_thread(second))
    waiter = await asyncio.wrap_future(waiter_pid)

    def blockers() -> list[int]:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT pg_blocking_pids(:pid)"), {"pid": waiter}).scalar_one())

    async def second_waits_on_first() -> bool:
        # Done early means the second writer failed or never queued: awaiting it below says which.
        return racing.done() or holder in await asyncio.to_thread(blockers)

    await eventually(second_waits_on_first)
    first.commit()
    first.close()
    return await asyncio.wait_for(racing, 30)


async def test_two_first_writes_of_a_key_queue_instead_of_failing(replicas: list[EmbeddedGateway]) -> None:
    """The first write of a control key by two replicas at once: the second waits for the
    first's row and takes the next revision (it used to fail on the primary key: a 500)."""
    engine = replicas[0].app.state.db.engine
    key = f"test.first-{uuid.uuid4().hex[:6]}"
    first = Session(engine)
    assert bump(first, key, {"by": "a"}, "a") == 1  # not committed yet

    def second(session: Session) -> int:
        return bump(session, key, {"by": "b"}, "b")

    assert await second_writer_behind(engine, first, second) == 2
    with Session(engine) as session:
        row = session.get(ControlValue, key)
        assert row is not None and (row.revision, row.value) == (2, {"by": "b"})


async def test_two_first_versions_of_a_prompt_queue_instead_of_failing(replicas: list[EmbeddedGateway]) -> None:
    engine = replicas[0].app.state.db.engine
    name = f"p-{uuid.uuid4().hex[:6]}"
    first = Session(engine)
    assert add_version(first, name, VersionIn(text="one"), "a")["version"] == 1  # not committed yet

    def second(session: Session) -> int:
        return int(add_version(session, name, VersionIn(text="two"), "b")["version"])

    assert await second_writer_behind(engine, first, second) == 2
