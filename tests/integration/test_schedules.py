"""Schedules over HTTP against a real gateway and nats-server: each answer lists the next fire
times; bad timing is a 422 naming the field; the server fires the schedule and each fire becomes
one task owned by the schedule's creator, recorded in the fire history; a fire delivered again
starts nothing twice; `max_concurrent` skips (and records) a fire while a run is still going, and
only then; pause, resume, run now and removal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from services.gateway.access.principal import Principal
from services.gateway.embedded import EmbeddedGateway
from services.gateway.runs.submit import SubmitTask, create_in
from services.gateway.triggers.fires import Fire
from services.gateway.triggers.firing import decide_all
from shared.bus import Bus
from shared.bus.tools import ToolRegistry, serve_tools
from shared.settings import Settings
from tests.integration.test_gateway_api import DSL, assert_problem, bearer
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.wait import eventually


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "alice"), timeout=30) as c:
        yield c


async def workflow(client: httpx.AsyncClient) -> str:
    resp = await client.post("/api/v1/workflows", json={"name": "w", "dsl": DSL})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def fires(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/api/v1/schedules/{sid}/fires")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def test_bad_timing_is_422_naming_the_field(alice: httpx.AsyncClient) -> None:
    wid = await workflow(alice)
    cases = [
        ({"cron": "* * * * *"}, "cron"),  # 5 fields
        ({"cron": "99 * * * * *"}, "cron"),  # out of range
        ({"cron": "0 0 9 * * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"every": "soon"}, "every"),
        ({"at": "2027-01-01T09:00:00"}, "at"),  # no offset
        ({"every": "1s", "cron": "* * * * * *"}, "cron"),
        ({"every": "1s", "end_at": "2027-01-01T00:00:00"}, "end_at"),
    ]
    for extra, field in cases:
        body = assert_problem(await alice.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": "x"},
                                                                         **extra}), 422)
        assert body["errors"][0]["field"] == field, (extra, body)
    body = assert_problem(await alice.post("/api/v1/schedules", json={"workflow_id": wid, "every": "1s",
                                                                     "assistant": "a"}), 422)
    assert body["errors"][0]["field"] == "assistant"
    assert_problem(await alice.post("/api/v1/schedules", json={"workflow_id": "wf_nope", "every": "1s"}), 404)
    assert (await alice.get("/api/v1/schedules")).json()["items"] == []


async def test_next_fire_times_are_listed_and_keep_local_time_across_dst(alice: httpx.AsyncClient) -> None:
    wid = await workflow(alice)
    resp = await alice.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": "x"},
                                                       "cron": "0 0 9 * * *", "timezone": "Europe/Berlin",
                                                       "enabled": False})
    assert resp.status_code == 201, resp.text
    sid = resp.json()["id"]
    assert resp.json()["next_fire_times"] == []  # paused: nothing due
    made = (await alice.post(f"/api/v1/schedules/{sid}/resume")).json()
    times = [datetime.fromisoformat(t) for t in made["next_fire_times"]]
    assert len(times) == 5 and all(t.hour == 9 and t.minute == 0 for t in times)
    assert all(t.utcoffset() in (timedelta(hours=1), timedelta(hours=2)) for t in times)  # Berlin's own offset
    assert (await alice.delete(f"/api/v1/schedules/{sid}")).status_code == 200
    assert_problem(await alice.get(f"/api/v1/schedules/{sid}"), 404)


async def test_each_fire_becomes_one_task_and_an_overlapping_one_is_skipped(gw: EmbeddedGateway,
                                                                            alice: httpx.AsyncClient) -> None:
    """No dispatcher runs here, so the first fire's task stays `submitted`: with
    `max_concurrent: 1` every later fire is skipped, with why, until the schedule is removed."""
    wid = await workflow(alice)
    resp = await alice.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": "tick"},
                                                       "every": "1s", "max_concurrent": 1, "name": "ticker"})
    assert resp.status_code == 201, resp.text
    sid = resp.json()["id"]
    assert len(resp.json()["next_fire_times"]) == 5

    history = await eventually(lambda: _at_least(alice, sid, 3), attempts=1500)
    started = [f for f in history if f["outcome"] == "started"]
    skipped = [f for f in history if f["outcome"] == "skipped"]
    assert len(started) == 1 and skipped
    assert all("max_concurrent: 1" in f["reason"] for f in skipped)
    task = (await alice.get(f"/api/v1/tasks/{started[0]['task_id']}")).json()
    assert task["status"] == "submitted" and task["input"] == {"text": "tick"}
    assert started[0]["id"] == f"fire:{sid}:{started[0]['seq']}"
    assert task["trigger"] == {"kind": "schedule", "id": sid, "fired_at": task["trigger"]["fired_at"]}
    assert datetime.fromisoformat(task["trigger"]["fired_at"]) == datetime.fromisoformat(started[0]["fired_at"])
    listed = (await alice.get("/api/v1/tasks")).json()["items"]
    assert next(t for t in listed if t["id"] == task["id"])["trigger"] == task["trigger"]

    # the same fire again (a redelivery): decided already, so nothing more starts
    assert gw.app is not None
    db = gw.app.state.db
    again = Fire(schedule_id=sid, seq=started[0]["seq"], fired_at=datetime.now(UTC), next_at=None, payload=b"{}")
    assert await db.run(decide_all, [again]) == []

    assert (await alice.post(f"/api/v1/schedules/{sid}/pause")).json()["enabled"] is False
    ran = (await alice.post(f"/api/v1/schedules/{sid}/run")).json()
    assert ran["fire_id"].startswith(f"now:{sid}:")
    now_task = (await alice.get(f"/api/v1/tasks/{ran['task_id']}")).json()
    assert now_task["trigger"]["kind"] == "schedule" and now_task["trigger"]["id"] == sid
    # a task a person posts names no trigger, and none can be given in its body
    posted = await alice.post("/api/v1/tasks", json={"workflow_id": wid, "input": {"text": "by hand"}})
    assert posted.status_code == 202, posted.text
    assert (await alice.get(f"/api/v1/tasks/{posted.json()['id']}")).json()["trigger"] is None
    spoofed = await alice.post("/api/v1/tasks", json={"workflow_id": wid, "trigger": {"kind": "schedule"}})
    assert_problem(spoofed, 422)
    # the run-now fire's task is found again by its id, never made twice
    body = SubmitTask(workflow_id=wid, input={"text": "tick"})
    replay = await db.run(create_in, Principal(id="alice"), body, ran["fire_id"])
    assert replay.id == ran["task_id"]
    assert (await alice.delete(f"/api/v1/schedules/{sid}")).status_code == 200


async def _at_least(client: httpx.AsyncClient, sid: str, n: int) -> list[dict[str, Any]] | None:
    got = await fires(client, sid)
    return got if len(got) >= n else None


async def test_patch_changes_timing_and_another_user_sees_nothing(gw: EmbeddedGateway,
                                                                  alice: httpx.AsyncClient) -> None:
    wid = await workflow(alice)
    sid = (await alice.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": "x"},
                                                       "cron": "0 0 * * * *", "enabled": False})).json()["id"]
    changed = await alice.patch(f"/api/v1/schedules/{sid}", json={"every": "1h", "catch_up": "once"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["cron"] is None and changed.json()["every"] == "1h" and changed.json()["catch_up"] == "once"
    body = assert_problem(await alice.patch(f"/api/v1/schedules/{sid}", json={"timezone": "Nowhere/Else"}), 422)
    assert body["errors"][0]["field"] == "timezone"
    async with httpx.AsyncClient(base_url=gw.url, headers=bearer(gw.settings, "bob"), timeout=30) as bob:
        assert_problem(await bob.get(f"/api/v1/schedules/{sid}"), 404)
        assert (await bob.get("/api/v1/schedules")).json()["items"] == []
    assert (await alice.delete(f"/api/v1/schedules/{sid}")).status_code == 200


async def test_the_cli_adds_lists_pauses_resumes_runs_and_removes(gw: EmbeddedGateway, alice: httpx.AsyncClient,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from agentix.cli import main
    from shared.auth_tokens import mint_token

    wid = await workflow(alice)
    server = ["--url", gw.url, "--token", mint_token(gw.settings, "alice")]

    async def cli(*argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["schedule", *argv, *server])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = await cli("add", wid, "--cron", "0 0 9 * * *", "--timezone", "Europe/Berlin",
                             "--input", '{"text": "hi"}', "--name", "morning", "--paused")
    assert code == 0 and "paused" in out and "next: none" in out
    sid = out.split()[1]
    code, out, _ = await cli("list")
    assert code == 0 and sid in out and "morning" in out and "cron 0 0 9 * * * Europe/Berlin" in out
    code, out, _ = await cli("resume", sid)
    assert code == 0 and "enabled" in out and "T09:00:00+0" in out
    code, out, _ = await cli("run", sid)
    assert code == 0 and out.strip().startswith("t")
    code, out, _ = await cli("fires", sid)
    assert code == 0 and "started" in out and "run now" in out
    code, out, _ = await cli("pause", sid)
    assert code == 0 and "paused" in out
    code, _, err = await cli("add", wid, "--cron", "* * * * *")
    assert code == 1 and "cron" in err
    code, out, _ = await cli("rm", sid)
    assert code == 0 and "removed" in out
    code, _, err = await cli("rm", sid)
    assert code == 1 and "No schedule" in err


async def test_max_concurrent_one_skips_only_while_the_run_goes(scripted: Settings, srv: oai.OpenAIServer) -> None:
    """The first fire's run is held by the model (a gate): every fire meanwhile is skipped; once
    the gate opens and the run ends, the next fire starts a task again."""
    srv.script([oai.reply("held", gate="sched", gate_after=1)], then=oai.reply("quick"))
    gateway = await EmbeddedGateway(scripted.model_copy(update={"rate_limit_per_min": 100_000})).start()
    bus = await Bus.connect(scripted, name="test")
    tools = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
    try:
        async with dispatcher(gateway.settings), httpx.AsyncClient(
                base_url=gateway.url, headers=bearer(gateway.settings, "alice"), timeout=30) as alice:  # fmt: skip
            wid = await workflow(alice)
            sid = (await alice.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": "tick"},
                                                               "every": "1s", "max_concurrent": 1})).json()["id"]

            async def skipped_while_held() -> list[dict[str, Any]] | None:
                got = sorted(await fires(alice, sid), key=lambda f: f["seq"])
                return got if sum(f["outcome"] == "skipped" for f in got) >= 2 else None

            held = await eventually(skipped_while_held, attempts=1500)
            first = held[0]
            assert first["outcome"] == "started" and all(f["outcome"] == "skipped" for f in held[1:]), held
            assert (await alice.get(f"/api/v1/tasks/{first['task_id']}")).json()["status"] == "running"
            await _release(srv, "sched")

            async def started_again() -> list[dict[str, Any]] | None:
                got = sorted(await fires(alice, sid), key=lambda f: f["seq"])
                return got if sum(f["outcome"] == "started" for f in got) >= 2 else None

            history = await eventually(started_again, attempts=1500)
            assert (await alice.post(f"/api/v1/schedules/{sid}/pause")).status_code == 200
            again = [f for f in history if f["outcome"] == "started"][1]
            between = [f for f in history if first["seq"] < f["seq"] < again["seq"]]
            assert len(between) >= 2 and all("max_concurrent: 1" in f["reason"] for f in between), between
            done = (await alice.get(f"/api/v1/tasks/{first['task_id']}")).json()
            assert done["status"] == "done", done  # the run had ended when the next fire started one
    finally:
        await _release(srv, "sched")
        await gateway.stop()
        for server in tools:
            await server.drain()
        await bus.close()


async def _release(srv: oai.OpenAIServer, gate: str) -> None:
    async with httpx.AsyncClient() as http:
        (await http.post(srv.url.removesuffix("/v1") + "/_release", json={"gate": gate})).raise_for_status()
