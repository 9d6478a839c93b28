"""Tasks submitted while NATS is down: 202 with the row kept (`queued: false`), published once
NATS is back (same message id, so never twice); the periodic pass also publishes rows a crash
left unqueued, and only rows that are old enough and not yet running. A control change saved
during the outage is broadcast after the reconnect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway.embedded import EmbeddedGateway
from services.gateway.ids import new_id
from services.gateway.runs import submit
from services.gateway.runs.submit import requeue_unpublished
from services.gateway.tables import Task, now
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.contract.task import TaskMessage
from shared.natsd import NatsServer
from shared.settings import Settings
from tests.conftest import drop_deployment, make_settings
from tests.support.wait import eventually

DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"}, {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}}],
    "edges": [{"source": "in", "target": "out"}],
}


@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[NatsServer]:
    """A server this test may kill without disturbing the session's shared one."""
    server = NatsServer(store_dir=tmp_path / "nats").start()
    yield server
    server.cleanup()


async def queued_messages(bus: Bus) -> list[Any]:
    sub = await bus.js.pull_subscribe_bind(durable=bus.names.dispatcher_consumer, stream=bus.names.tasks_stream)
    try:
        return await sub.fetch(50, timeout=1)
    except TimeoutError:
        return []


def row(gw: EmbeddedGateway, task_id: str) -> Task:
    with gw.app.state.db.session() as session:
        task = session.get(Task, task_id)
        assert task is not None
        return task


async def test_submit_while_nats_is_down_is_kept_and_published_when_it_is_back(
    own_nats: NatsServer, tmp_path: Path
) -> None:
    settings = make_settings(own_nats.url, tmp_path / "data", task_requeue_interval_s=0.5, task_requeue_min_age_s=0.0)
    gw = await EmbeddedGateway(settings).start()
    headers = {"Authorization": f"Bearer {mint_token(settings, 'alice')}"}
    checker: Bus | None = None
    try:
        async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=30) as alice:
            up = await alice.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "before"}})
            assert up.status_code == 202 and up.json()["queued"] is True

            own_nats.kill()
            bus: Bus = gw.app.state.bus
            await eventually(lambda: asyncio.sleep(0, result=not bus.connected))
            down = await alice.post(
                "/api/v1/tasks",
                json={"dsl": DSL, "input": {"text": "during"}, "session_id": "s-1"},
                headers={"Idempotency-Key": "outage"},
            )
            assert down.status_code == 202, down.text
            assert down.json()["status"] == "submitted" and down.json()["queued"] is False
            task_id = down.json()["id"]
            again = await alice.post(
                "/api/v1/tasks", json={"dsl": DSL, "input": {"text": "during"}}, headers={"Idempotency-Key": "outage"}
            )
            assert again.json()["id"] == task_id and again.json()["queued"] is False
            # Submit-and-follow cannot follow a task the bus does not have: it answers as POST /tasks.
            follow = await alice.post("/api/v1/tasks/stream", json={"dsl": DSL, "input": {"text": "during"}},
                                      headers={"Idempotency-Key": "outage"})
            assert follow.status_code == 202 and follow.json()["id"] == task_id and follow.json()["queued"] is False
            body = (await alice.get(f"/api/v1/tasks/{task_id}")).json()
            assert body["status"] == "submitted" and body["error"] is None
            assert row(gw, task_id).queued_at is None
            # Actions that need the bus right now answer 503, never 500.
            cancel = await alice.post(f"/api/v1/tasks/{task_id}/cancel")
            assert cancel.status_code == 503
            assert cancel.headers["content-type"].startswith("application/problem+json")

            root = {"Authorization": f"Bearer {mint_token(settings, 'root', admin=True)}"}
            prices = {"models": {"m": {"prompt_per_1k": 0.25, "completion_per_1k": 0.5}}}
            saved = await alice.put("/api/v1/admin/pricing", json=prices, headers=root)
            assert saved.status_code == 503 and "not yet broadcast" in saved.json()["detail"]

            own_nats.start()  # same port, same store
            await eventually(lambda: asyncio.sleep(0, result=row(gw, task_id).queued_at is not None), attempts=1000)

            checker = await Bus.connect(settings, name="checker")
            msgs = await queued_messages(checker)
            by_id = {m.headers["Nats-Msg-Id"]: TaskMessage.from_bytes(m.data) for m in msgs}
            assert sorted(by_id) == sorted([up.json()["id"], task_id]), "each task on the queue exactly once"
            assert by_id[task_id].input == {"text": "during"} and by_id[task_id].session_id == "s-1"
            pricing = await eventually(lambda: ControlPlane(checker).get("pricing"))
            assert pricing[0]["models"]["m"]["prompt_per_1k"] == 0.25, "the change saved during the outage went out"
    finally:
        await gw.stop()
        if checker is not None:
            await drop_deployment(checker)
            await checker.close()


@pytest.fixture
async def gw(settings: Settings) -> AsyncIterator[EmbeddedGateway]:
    # A long interval: this test drives the passes itself.
    gateway = await EmbeddedGateway(settings.model_copy(update={"task_requeue_interval_s": 3600.0})).start()
    yield gateway
    await gateway.stop()


def insert(gw: EmbeddedGateway, status: str = "submitted", age_s: float = 60.0, changed_s: float | None = None) -> str:
    """A row as a crash between the insert (or a retry's reopening) and the publish leaves it."""
    task = Task(
        id=new_id("t"), user_id="alice", status=status, dsl=DSL, input={"text": "x"},
        created_at=now() - timedelta(seconds=age_s),
        updated_at=None if changed_s is None else now() - timedelta(seconds=changed_s),
    )  # fmt: skip
    with gw.app.state.db.session() as session:
        session.add(task)
        session.commit()
    return task.id


async def test_the_periodic_pass_publishes_old_unqueued_rows_once(gw: EmbeddedGateway) -> None:
    bus: Bus = gw.app.state.bus
    db = gw.app.state.db
    old = insert(gw)
    fresh = insert(gw, age_s=0.0)
    running = insert(gw, status="running")
    reopened = insert(gw, changed_s=0.0)  # an old task a retry has just reopened

    assert await requeue_unpublished(db, bus, min_age_s=30.0) == 1
    assert row(gw, old).queued_at is not None and row(gw, old).queue_seq is not None
    assert row(gw, fresh).queued_at is None, "too young: its own submit may still be publishing"
    assert row(gw, reopened).queued_at is None, "the age counts from the retry"
    assert row(gw, running).queued_at is None, "a started task is never re-published"

    # A publish whose ack was lost: the row looks unqueued, but the message is on the stream.
    with db.session() as session:
        task = session.get(Task, old)
        assert task is not None
        task.queued_at = None
        session.add(task)
        session.commit()
    assert await requeue_unpublished(db, bus, min_age_s=0.0) == 3  # `old` again, `fresh`, `reopened`
    assert await requeue_unpublished(db, bus, min_age_s=0.0) == 0

    msgs = await queued_messages(bus)
    expected = sorted([old, fresh, reopened])
    assert sorted(m.headers["Nats-Msg-Id"] for m in msgs) == expected, "deduplicated by task id"


async def test_the_running_gateway_repeats_the_pass(settings: Settings) -> None:
    """No restart and no reconnect: a row left unqueued is picked up by a later pass."""
    configured = settings.model_copy(update={"task_requeue_interval_s": 0.2, "task_requeue_min_age_s": 0.0})
    gateway = await EmbeddedGateway(configured).start()
    try:
        requeuer = gateway.app.state.requeuer
        left = insert(gateway, age_s=0.0)
        # The pass counts what it published once it is over, after marking each row queued.
        await eventually(lambda: asyncio.sleep(0, result=requeuer.published == 1))
        assert row(gateway, left).queued_at is not None
        [msg] = await queued_messages(gateway.app.state.bus)
        assert msg.headers["Nats-Msg-Id"] == left
    finally:
        await gateway.stop()


async def test_a_submit_rides_through_an_election_of_the_tasks_stream(gw: EmbeddedGateway, settings: Settings) -> None:
    """The tasks stream has no leader (here: no stream, and a subscriber that swallows the
    publishes, as a dying leader does): the request waits, and is queued once a leader answers."""
    bus: Bus = gw.app.state.bus
    await bus.js.delete_stream(bus.names.tasks_stream)
    swallow = await bus.nc.subscribe(bus.subjects.tasks_submit)
    headers = {"Authorization": f"Bearer {mint_token(settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=60) as alice:
        post = asyncio.create_task(alice.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "x"}}))
        await swallow.next_msg(timeout=30)  # the first try reached the cluster, and got no answer
        await swallow.unsubscribe()
        await bus.declare()  # a leader again
        answer = await post
    assert answer.status_code == 202 and answer.json()["queued"] is True, answer.text
    [msg] = await queued_messages(bus)
    assert msg.headers["Nats-Msg-Id"] == answer.json()["id"]


async def test_a_submit_that_finds_no_leader_is_kept_without_holding_the_request(
        gw: EmbeddedGateway, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """No leader within the gateway's publish wait: 202 `queued: false` then, not after the
    bus's 30 s; the requeuer publishes the kept row once a leader answers."""
    monkeypatch.setattr(submit, "PUBLISH_WAIT_S", 2.0)  # the wait's length is not what is tested
    bus: Bus = gw.app.state.bus
    await bus.js.delete_stream(bus.names.tasks_stream)
    headers = {"Authorization": f"Bearer {mint_token(settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=60) as alice:
        async with asyncio.timeout(submit.PUBLISH_WAIT_S + 15):  # well under the bus's 30 s + slack
            answer = await alice.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "x"}})
    assert answer.status_code == 202 and answer.json()["queued"] is False, answer.text
    task_id = answer.json()["id"]
    assert row(gw, task_id).status == "submitted" and row(gw, task_id).queued_at is None
    await bus.declare()
    assert await requeue_unpublished(gw.app.state.db, bus, min_age_s=0.0) == 1
    [msg] = await queued_messages(bus)
    assert msg.headers["Nats-Msg-Id"] == task_id
