"""LangGraph crons at `/lg`, driven by the real `langgraph-sdk` against a real gateway and
nats-server: a cron is an Agentix schedule of a saved workflow (the same record, read at
`/api/v1/schedules/{cron_id}`), made, searched, counted, changed and removed through
`client.crons.*`; the server fires it and the fire's task carries its trigger; every body field
it cannot honour is a 422 naming that field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from tests.integration.test_gateway_api import bearer
from tests.integration.test_schedules import fires, workflow
from tests.support.wait import eventually


def lg(gw: EmbeddedGateway, user: str) -> LangGraphClient:
    """The SDK as a user sets it up: the gateway's URL + `/lg`, the API token as its key."""
    return get_client(url=gw.url + "/lg", api_key=mint_token(gw.settings, user))


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "alice"), timeout=30) as c:
        yield c


async def test_a_cron_round_trip_with_the_sdk(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    wid = await workflow(alice)
    client = lg(gw, "alice")
    assert (await client.http.get("/info"))["flags"]["crons"] is True
    end = datetime(2099, 1, 1, tzinfo=UTC)
    cron = await client.crons.create(wid, schedule="0 9 * * *", input={"text": "daily"}, timezone="Europe/Berlin",
                                     end_time=end)
    cid = cron["cron_id"]
    assert cron["assistant_id"] == wid and cron["thread_id"] is None and cron["enabled"] is True
    assert cron["schedule"] == "0 9 * * *" and cron["timezone"] == "Europe/Berlin"
    assert datetime.fromisoformat(cron["end_time"]) == end
    assert cron["payload"]["input"] == {"text": "daily"} and cron["on_run_completed"] == "keep"
    first = datetime.fromisoformat(cron["next_run_date"])  # in Berlin's own offset
    assert (first.hour, first.minute) == (9, 0) and first.utcoffset() in (timedelta(hours=1), timedelta(hours=2))

    # the very same schedule, seen through the schedules API: 6 fields, fired at second 0
    schedule = (await alice.get(f"/api/v1/schedules/{cid}")).json()
    assert schedule["cron"] == "0 0 9 * * *" and schedule["workflow_id"] == wid
    assert schedule["timezone"] == "Europe/Berlin" and schedule["input"] == {"text": "daily"}

    other = await client.crons.create(wid, schedule="*/5 * * * *", input={"text": "often"}, enabled=False)
    assert other["enabled"] is False and other["next_run_date"] is None
    found = await client.crons.search(assistant_id=wid)
    assert [c["cron_id"] for c in found] == [other["cron_id"], cid]  # newest first
    assert [c["cron_id"] for c in await client.crons.search(enabled=True)] == [cid]
    assert await client.crons.search(thread_id="t-none") == []
    assert await client.crons.search(assistant_id="wf_other") == []
    page = await client.crons.search(limit=1, offset=1, sort_by="created_at", sort_order="asc",
                                     select=["cron_id", "schedule"])
    assert page == [{"cron_id": other["cron_id"], "schedule": "*/5 * * * *"}]
    assert await client.crons.count(assistant_id=wid) == 2
    assert await client.crons.count(metadata={"team": "a"}) == 0

    changed = await client.crons.update(cid, schedule="30 8 * * 1", input={"text": "weekly"}, end_time=None)
    assert changed["schedule"] == "30 8 * * 1" and changed["end_time"] is None
    assert changed["payload"]["input"] == {"text": "weekly"}
    monday = datetime.fromisoformat(changed["next_run_date"])
    assert (monday.weekday(), monday.hour, monday.minute) == (0, 8, 30)
    paused = await client.crons.update(cid, enabled=False)
    assert paused["enabled"] is False and paused["next_run_date"] is None
    assert (await client.http.get(f"/runs/crons/{cid}"))["schedule"] == "30 8 * * 1"
    assert (await alice.get(f"/api/v1/schedules/{cid}")).json()["enabled"] is False

    bob = lg(gw, "bob")
    assert await bob.crons.search() == [] and await bob.crons.count() == 0
    with pytest.raises(NotFoundError):
        await bob.crons.delete(cid)
    with pytest.raises(NotFoundError):
        await bob.crons.create(wid, schedule="0 9 * * *", input={"text": "x"})  # not bob's workflow

    await client.crons.delete(cid)
    await client.crons.delete(other["cron_id"])
    assert await client.crons.search() == []
    with pytest.raises(NotFoundError):
        await client.http.get(f"/runs/crons/{cid}")
    assert (await alice.get(f"/api/v1/schedules/{cid}")).status_code == 404


async def test_a_cron_fires_and_its_task_names_the_cron(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    """A 5-field cron fires once a minute at best: the test waits for the server's next minute."""
    wid = await workflow(alice)
    client = lg(gw, "alice")
    cron = await client.crons.create(wid, schedule="* * * * *", input={"text": "tick"})
    cid = cron["cron_id"]
    due = datetime.fromisoformat(cron["next_run_date"])
    assert due.second == 0 and due - datetime.now(UTC) <= timedelta(seconds=60)

    async def started() -> dict[str, Any] | None:
        return next((f for f in await fires(alice, cid) if f["outcome"] == "started"), None)

    fire = await eventually(started, attempts=150, every_s=0.5)  # up to 75 s: the next minute, and then some
    assert fire["id"] == f"fire:{cid}:{fire['seq']}"
    task = (await alice.get(f"/api/v1/tasks/{fire['task_id']}")).json()
    assert task["workflow_id"] == wid and task["input"] == {"text": "tick"} and task["user_id"] == "alice"
    assert task["trigger"]["kind"] == "schedule" and task["trigger"]["id"] == cid
    assert datetime.fromisoformat(task["trigger"]["fired_at"]) == datetime.fromisoformat(fire["fired_at"])
    listed = (await alice.get("/api/v1/tasks")).json()["items"]
    assert next(t for t in listed if t["id"] == task["id"])["trigger"] == task["trigger"]
    assert (await client.crons.search())[0]["cron_id"] == cid
    await client.crons.delete(cid)


async def test_what_a_cron_cannot_do_is_a_422_naming_the_field(gw: EmbeddedGateway, alice: httpx.AsyncClient) -> None:
    wid = await workflow(alice)
    client = lg(gw, "alice")
    good: dict[str, Any] = {"schedule": "0 9 * * *", "input": {"text": "x"}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"schedule": "0 0 9 * * *"}, "schedule"),  # 6 fields: LangGraph's cron has 5
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"schedule": "0 " * 100}, "schedule"),  # longer than a schedule's cron may be
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"webhook": "https://example.com/hook"}, "webhook"),
        ({"metadata": {"team": "a"}}, "metadata"),
        ({"config": {"configurable": {"model": "m"}}}, "config"),
        ({"context": {"model": "m"}}, "context"),
        ({"interrupt_before": ["ans"]}, "interrupt_before"),
        ({"interrupt_after": "*"}, "interrupt_after"),
        ({"multitask_strategy": "enqueue"}, "multitask_strategy"),
        ({"on_run_completed": "delete"}, "on_run_completed"),
        ({"stream_mode": ["values"]}, "stream_mode"),
        ({"stream_subgraphs": True}, "stream_subgraphs"),
    ]
    for extra, field in cases:
        with pytest.raises(UnprocessableEntityError) as caught:
            await client.crons.create(wid, **{**good, **extra})
        assert caught.value.body["errors"][0]["field"] == field, (extra, caught.value.body)
    raw = {"assistant_id": wid, **good}
    for extra, field in [({"end_time": "2099-01-01T00:00:00"}, "end_time"), ({"cadence": "daily"}, "cadence"),
                         ({"assistant_id": "chat-react"}, "assistant_id")]:
        resp = await client.http.client.post("/runs/crons", json={**raw, **extra})
        assert resp.status_code == 422, (extra, resp.text)
        assert resp.json()["errors"][0]["field"] == field, (extra, resp.text)
    with pytest.raises(UnprocessableEntityError) as caught:
        await client.crons.create_for_thread("t-1", wid, **good)
    assert caught.value.body["errors"][0]["field"] == "thread_id"
    with pytest.raises(NotFoundError):
        await client.crons.create("wf_nope", **good)
    assert await client.crons.count() == 0  # nothing made by any refused call

    cid = (await client.crons.create(wid, **good, enabled=False))["cron_id"]
    for patch, field in [({"schedule": "* *"}, "schedule"), ({"webhook": "https://example.com/h"}, "webhook"),
                         ({"timezone": "Nowhere/Else"}, "timezone")]:
        with pytest.raises(UnprocessableEntityError) as caught:
            await client.crons.update(cid, **patch)
        assert caught.value.body["errors"][0]["field"] == field, (patch, caught.value.body)
    assert (await client.http.get(f"/runs/crons/{cid}"))["schedule"] == "0 9 * * *"  # unchanged
    await client.crons.delete(cid)
