"""Schedules on a 3-node NATS cluster (replicas 3), with the services as their own processes and
PostgreSQL as the gateways' database.

- An `every: 1s` schedule with two gateways and two dispatchers fires N times in N seconds (± 1,
  by the fires' server timestamps), each fire once and each its own task. Then the dispatcher
  running the last fire's task, the gateway that decided that fire and the server leading the
  schedules stream are SIGKILLed together: once the fires settle, every fire the stream holds was
  decided exactly once, their sequences are contiguous, each started exactly one task, and the
  count matches the time they span (a leader election holds fires back a few seconds at most).
- After a stop of the whole cluster (every NATS node and the gateway) longer than the catch-up
  threshold, a `catch_up: once` schedule runs one late fire and a `catch_up: skip` one records it
  skipped; neither fires once per missed period."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway.embedded import GatewayProcess, settings_env
from services.gateway.triggers.catch_up import LATE_AFTER
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.natsd import free_port
from tests.integration.test_faults_cluster import deployment
from tests.integration.test_faults_schedules import _kill, _pending, _rows, _stream_fires, gateways
from tests.support import faults
from tests.support import openai_server as oai
from tests.support.cluster import NatsCluster
from tests.support.wait import eventually

pytestmark = pytest.mark.chaos
N = 8  # seconds of firing measured
ELECTION_S = 12.0  # the longest a leader change of the schedules stream may hold a fire back
JITTER_S = 0.3  # how far from one second apart two fires may be on a loaded machine (a lost one: 2 s)
QUICK_DSL = {"version": "1", "nodes": [{"id": "in", "kind": "input"},
                                       {"id": "out", "kind": "output", "config": {"value": "{{ in.q }}"}}],
             "edges": [{"source": "in", "target": "out"}]}  # fmt: skip


@pytest.fixture(scope="module")
def srv() -> Iterator[oai.OpenAIServer]:
    server = oai.OpenAIServer().start_in_thread()  # its own loop: the processes reach it any time
    yield server
    server.stop_thread()


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def _history(api: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    resp = await api.get(f"/api/v1/schedules/{sid}/fires", params={"limit": 500})
    assert resp.status_code == 200, resp.text
    return sorted(resp.json()["items"], key=lambda f: f["seq"] or 0)


async def _make(api: httpx.AsyncClient, dsl: dict[str, Any], **schedule: Any) -> str:
    resp = await api.post("/api/v1/workflows", json={"name": "w", "dsl": dsl})
    assert resp.status_code == 201, resp.text
    resp = await api.post("/api/v1/schedules", json={"workflow_id": resp.json()["id"], "input": {"q": "tick"},
                                                     "max_concurrent": 1000, **schedule})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def _connz(cluster: NatsCluster) -> list[dict[str, Any]]:
    """Every client connection of the running nodes, with its subscriptions."""
    conns: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=2) as client:
        for node in cluster.nodes:
            if node.running:
                resp = await client.get(f"http://127.0.0.1:{node.spec.monitor_port}/connz",
                                        params={"subs": "detail", "limit": 10_000})
                conns += resp.json().get("connections") or []
    return conns


def _pid_with_port(pids: list[int], port: int) -> int | None:
    """Which of the processes holds the TCP socket bound to local `port` (from /proc)."""
    inodes: dict[str, int] = {}
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes[link[8:-1]] = pid
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if int(parts[1].rsplit(":", 1)[1], 16) == port and parts[9] in inodes:
                return inodes[parts[9]]
    return None


async def _runner(cluster: NatsCluster, bus: Bus, pids: list[int], task_id: str) -> int | None:
    """The dispatcher process running `task_id`: each run subscribes to its task's `running`
    subject (services/dispatcher/standby.py), so the connection holding that subscription is it."""
    subject = bus.subjects.running(task_id)
    for conn in await _connz(cluster):
        if any(s.get("subject") == subject for s in conn.get("subscriptions_list_detail") or []):
            return _pid_with_port(pids, int(conn["port"]))
    return None


async def test_every_second_fires_once_each_through_kills_of_a_gateway_a_dispatcher_and_the_leader(
        cluster: NatsCluster, srv: oai.OpenAIServer, tmp_path: Path, fresh_pg: str) -> None:  # fmt: skip
    faults.script_slow_model(srv, delay_s=0.05)  # each task streams for ~2 s: the last one is running when looked at
    async with deployment(cluster.urls, tmp_path / "data", replicas=3) as (settings, bus):
        await faults.use_model_server(bus, srv)
        deployed = settings.model_copy(update={"gateway_db_url": fresh_pg, "rate_limit_per_min": 100_000})
        env = settings_env(deployed) | {"AGENTIX_LOG_LEVEL": "INFO"}
        headers = {"Authorization": f"Bearer {mint_token(deployed, 'sam')}"}
        logs = tmp_path / "logs"
        logs.mkdir()
        procs = faults.start_dispatchers(settings, logs, 2)
        try:
            async with gateways(env, 2, logs) as gws:
                await faults.dispatchers_alive(bus, procs)
                async with httpx.AsyncClient(base_url=gws[0].url, headers=headers, timeout=60) as api:
                    sid = await _make(api, faults.DSL, every="1s")

                    # 1. N seconds of firing, by the server's own timestamps of the fires
                    first = _at((await eventually(lambda: _history(api, sid), attempts=3000))[0]["fired_at"])
                    clock = time.monotonic()

                    async def past_window() -> list[dict[str, Any]] | None:
                        got = await _history(api, sid)
                        return got if _at(got[-1]["fired_at"]) >= first + timedelta(seconds=N) else None

                    history = await eventually(past_window, attempts=3000)
                    waited = time.monotonic() - clock
                    window = [f for f in history if _at(f["fired_at"]) < first + timedelta(seconds=N)]
                    assert N - 1 <= len(window) <= N + 1, [f["fired_at"] for f in window]
                    assert waited >= N - 1, waited  # not faster than real time
                    assert len({f["id"] for f in history}) == len(history)
                    started = [f for f in history if f["outcome"] == "started"]
                    assert len(started) == len(history), history  # max_concurrent 1000: none skipped
                    assert len({f["task_id"] for f in started}) == len(started)

                    # 2. the last fire's dispatcher and gateway, and the schedules stream's leader
                    pids = [p.pid for p in procs]

                    async def last_running() -> tuple[dict[str, Any], int] | None:
                        last = (await _history(api, sid))[-1]
                        pid = await _runner(cluster, bus, pids, last["task_id"])
                        return (last, pid) if pid is not None else None

                    last, pid = await eventually(last_running, attempts=3000)
                    decider = await eventually(lambda: _decided_by(gws, last["id"]), attempts=3000)
                leader = await cluster.leader_of(bus.names.schedules_stream)
                dispatcher = next(p for p in procs if p.pid == pid)
                dispatcher.send_signal(signal.SIGKILL)
                _kill(decider)
                cluster.node(leader).kill()
                killed_at = _at(last["fired_at"])
                await asyncio.to_thread(dispatcher.wait)
                survivor = next(g for g in gws if g is not decider)
                async with httpx.AsyncClient(base_url=survivor.url, headers=headers, timeout=60) as api:
                    async def fired_after_kills() -> bool:  # a new leader fires, a live gateway decides
                        got = await _history(api, sid)
                        return sum(_at(f["fired_at"]) > killed_at for f in got) >= 5

                    await eventually(fired_after_kills, attempts=6000)
                    assert (await api.post(f"/api/v1/schedules/{sid}/pause")).status_code == 200
                    assert await cluster.leader_of(bus.names.schedules_stream) != leader

                    async def drained() -> bool:  # the killed gateway's fires come back after the ack wait
                        return await _pending(bus) == 0

                    await eventually(drained, attempts=4000, every_s=0.05)
                    published = (await _stream_fires(bus, {sid}))[sid]

                    async def all_done() -> bool:  # the killed dispatcher's run was taken over
                        got = _rows(fresh_pg, "SELECT count(*) FROM tasks WHERE status <> 'done'")
                        return int(got[0][0]) == 0

                    await eventually(all_done, attempts=3000, every_s=0.05)
        finally:
            await faults.stop_all(procs)

    decided = _rows(fresh_pg, f"SELECT seq, outcome, task_id, reason, late, fired_at FROM schedule_fires "
                              f"WHERE schedule_id = '{sid}' ORDER BY seq")
    seqs = [row[0] for row in decided]
    assert len(seqs) == len(set(seqs)), "a fire decided twice"
    assert set(seqs) == published, (sorted(published - set(seqs)), sorted(set(seqs) - published))
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # contiguous: nothing between them
    assert not any(row[4] for row in decided), "a fire judged late"
    on = [row for row in decided if row[1] == "started"]
    assert all("paused" in (row[3] or "") for row in decided if row[1] != "started"), decided
    tasks = _rows(fresh_pg, "SELECT id, idempotency_key FROM tasks")
    assert sorted(key for _id, key in tasks) == sorted(f"fire:{sid}:{row[0]}" for row in on)  # one task per fire
    assert {row[2] for row in on} == {tid for tid, _key in tasks}
    # One fire a second (by the server's timestamps of the fires), but for the election: the new
    # leader fires the schedule once when it takes over, not once per second it missed (so the
    # gap is the election's), and the fire after that one is back on the one-second grid.
    times = [row[5] for row in on]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    odd = [i for i, gap in enumerate(gaps) if abs(gap - 1) > JITTER_S]
    assert len(odd) <= 2 and max(gaps) <= ELECTION_S, gaps
    assert len(odd) < 2 or (odd[1] == odd[0] + 1 and gaps[odd[1]] < 2), gaps  # only a realignment after it
    span = (times[-1] - times[0]).total_seconds()
    held = sum(gaps[i] - 1 for i in odd)
    assert abs((len(on) - 1) - (span - held)) <= 1, (len(on), span, gaps)


async def _decided_by(gws: list[GatewayProcess], fire_id: str) -> GatewayProcess | None:
    """The gateway whose log says it decided the fire (firing.py logs each batch it decided)."""
    for gw in gws:
        if gw.log is not None and gw.log.exists() and f"decided {fire_id}" in gw.log.read_text(errors="replace"):
            return gw
    return None


async def test_catch_up_once_runs_one_late_fire_and_skip_records_it_after_a_full_stop(
        cluster: NatsCluster, tmp_path: Path, fresh_pg: str) -> None:  # fmt: skip
    period = 3
    async with deployment(cluster.urls, tmp_path / "data", replicas=3) as (settings, _bus):
        deployed = settings.model_copy(update={"gateway_db_url": fresh_pg, "rate_limit_per_min": 100_000})
        env = settings_env(deployed)
        headers = {"Authorization": f"Bearer {mint_token(deployed, 'sam')}"}
        gateway = await GatewayProcess(env, free_port(), tmp_path / "gateway.log").start(timeout_s=120)
        try:
            async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as api:
                once = await _make(api, QUICK_DSL, every=f"{period}s", catch_up="once")
                skip = await _make(api, QUICK_DSL, every=f"{period}s", catch_up="skip")

                async def both_fired() -> bool:
                    return all([await _history(api, sid) for sid in (once, skip)])

                await eventually(both_fired, attempts=3000)
        finally:
            await gateway.stop()
        for node in cluster.nodes:
            node.stop()
        # The whole cluster stays down past the catch-up threshold and several periods: time
        # passing is what this test is about.
        await asyncio.sleep(LATE_AFTER.total_seconds() + 2 * period)
        downtime_ended = time.monotonic()
        for node in cluster.nodes:
            node.start()
        await cluster.wait_ready()
        gateway = await GatewayProcess(env, free_port(), tmp_path / "gateway.log").start(timeout_s=120)
        try:
            async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as api:
                async def late_fires() -> dict[str, list[dict[str, Any]]] | None:
                    got = {sid: await _history(api, sid) for sid in (once, skip)}
                    # the late fire, and the fire after it (on time again)
                    ok = all(any(f["late"] for f in fires) and not fires[-1]["late"] for fires in got.values())
                    return got if ok else None

                histories = await eventually(late_fires, attempts=3000, every_s=0.05)
                back_for = time.monotonic() - downtime_ended
                for sid in (once, skip):
                    assert (await api.post(f"/api/v1/schedules/{sid}/pause")).status_code == 200
        finally:
            await gateway.stop()

    for sid, policy in ((once, "once"), (skip, "skip")):
        fires = histories[sid]
        late = [f for f in fires if f["late"]]
        assert len(late) == 1, fires  # one fire for the missed periods, not one per period
        at = fires.index(late[0])
        assert at > 0, fires  # it fired before the stop
        missed = (_at(late[0]["fired_at"]) - _at(fires[at - 1]["fired_at"])).total_seconds()
        assert missed > LATE_AFTER.total_seconds() + period, fires  # several periods went by, one fire came
        after = fires[at:]
        # since the restart: the late fire, then one per period (not a burst of missed ones)
        assert len(after) <= back_for / period + 2, (after, back_for)
        if policy == "once":
            assert late[0]["outcome"] == "started" and late[0]["task_id"], late
        else:
            assert late[0]["outcome"] == "skipped" and late[0]["task_id"] is None, late
            assert "catch_up: skip" in late[0]["reason"], late
        assert all(f["outcome"] == "started" for f in fires if not f["late"]), fires
