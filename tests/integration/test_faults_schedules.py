"""Schedules through gateway deaths, with real processes on one NATS and one PostgreSQL: ten
schedules fire every second while two gateway processes take the fires; one is SIGKILLed, then
the other, so fires fall due with no gateway at all; a gateway is started again. Every fire the
server published is decided exactly once — one row of the fire history and one task per fire,
each task's idempotency key the fire's id — none lost, none doubled."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from services.gateway.embedded import GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.retry import is_transient
from shared.natsd import free_port
from shared.settings import Settings
from tests.integration.test_gateway_api import DSL
from tests.support.wait import eventually

pytestmark = pytest.mark.chaos
SCHEDULES = 10


@contextlib.asynccontextmanager
async def gateways(env: dict[str, str], n: int, logs: Path | None = None) -> AsyncIterator[list[GatewayProcess]]:
    """`n` gateway processes; with `logs`, each one's output in `logs/gateway<i>.log`."""
    procs = [GatewayProcess(env, free_port(), logs / f"gateway{i}.log" if logs else None) for i in range(n)]
    try:
        await asyncio.gather(*(p.start(timeout_s=120) for p in procs))
        yield procs
    finally:
        for p in procs:
            await p.stop()


def _kill(gateway: GatewayProcess) -> None:
    proc = gateway._proc
    assert proc is not None and proc.returncode is None
    proc.send_signal(signal.SIGKILL)  # no drain, no ack: fires in its hands come back


async def _stream_fires(bus: Bus, schedule_ids: set[str]) -> dict[str, set[int]]:
    """Every fire the server published for the schedules, by schedule: its stream sequences."""
    sub = await bus.js.pull_subscribe(bus.subjects.schedule_fires_all, stream=bus.names.schedules_stream)
    out: dict[str, set[int]] = {sid: set() for sid in schedule_ids}
    settling = 50  # after a node kill the new consumer can answer 503 until its stream settles
    try:
        while True:
            try:
                msgs = await sub.fetch(500, timeout=1.0)
            except TimeoutError:
                return out
            except Exception as exc:
                settling -= 1
                if settling <= 0 or not is_transient(exc):
                    raise
                await asyncio.sleep(0.2)
                continue
            for msg in msgs:
                sid = msg.subject.rsplit(".", 1)[-1]
                if sid in out:
                    out[sid].add(msg.metadata.sequence.stream)
                await msg.ack()
    finally:
        await sub.unsubscribe()


def _rows(db_url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        return list(conn.execute(sql).fetchall())


async def _pending(bus: Bus) -> int:
    info = await bus.js.consumer_info(bus.names.schedules_stream, bus.names.triggers_consumer)
    return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


async def test_no_fire_lost_or_doubled_when_gateways_are_killed_while_fires_are_due(
        settings: Settings, bus: Bus, fresh_pg: str) -> None:  # fmt: skip
    deployed = settings.model_copy(update={"gateway_db_url": fresh_pg, "rate_limit_per_min": 100_000})
    env = settings_env(deployed)
    headers = {"Authorization": f"Bearer {mint_token(deployed, 'sam')}"}
    async with gateways(env, 2) as (first, second):
        async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=60) as api:
            wid = (await api.post("/api/v1/workflows", json={"name": "w", "dsl": DSL})).json()["id"]
            sids: set[str] = set()
            for i in range(SCHEDULES):
                resp = await api.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": f"s{i}"},
                                                                 "every": "1s", "max_concurrent": 1000})
                assert resp.status_code == 201, resp.text
                sids.add(resp.json()["id"])

        async def started(n: int) -> bool:
            got = _rows(fresh_pg, "SELECT count(*) FROM schedule_fires WHERE outcome = 'started'")
            return int(got[0][0]) >= n

        await eventually(lambda: started(2 * SCHEDULES), attempts=3000)
        _kill(first)  # fires keep coming; the other gateway takes them, and those the victim held
        await eventually(lambda: started(5 * SCHEDULES), attempts=3000)
        _kill(second)  # now no gateway at all while fires fall due

        async def piled_up() -> bool:
            return await _pending(bus) >= 3 * SCHEDULES

        await eventually(piled_up, attempts=3000)
        back = GatewayProcess(env, free_port())
        await back.start(timeout_s=120)
        try:
            async with httpx.AsyncClient(base_url=back.url, headers=headers, timeout=60) as api:
                for sid in sids:  # stop the fires, so the count below is final
                    assert (await api.post(f"/api/v1/schedules/{sid}/pause")).status_code == 200

                async def drained() -> bool:
                    return await _pending(bus) == 0

                await eventually(drained, attempts=3000)
                published = await _stream_fires(bus, sids)
        finally:
            await back.stop()

    decided = _rows(fresh_pg, "SELECT schedule_id, seq, outcome, task_id, reason FROM schedule_fires")
    tasks = _rows(fresh_pg, "SELECT id, idempotency_key, user_id FROM tasks")
    expected = {(sid, seq) for sid, seqs in published.items() for seq in seqs}
    assert sum(len(s) for s in published.values()) >= 8 * SCHEDULES
    got = [(sid, seq) for sid, seq, *_ in decided]
    assert len(got) == len(set(got))  # none decided twice
    assert set(got) == expected  # none lost
    skipped = [row for row in decided if row[2] != "started"]
    assert all("paused" in (row[4] or "") for row in skipped), skipped  # only those after the pause
    keys = [key for _id, key, _user in tasks]
    assert len(keys) == len(set(keys))  # one task per fire id
    assert sorted(keys) == sorted(f"fire:{sid}:{seq}" for sid, seq, outcome, *_ in decided if outcome == "started")
    assert {row[3] for row in decided if row[2] == "started"} == {tid for tid, _k, _u in tasks}
    assert {user for *_x, user in tasks} == {"sam"}
