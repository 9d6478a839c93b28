"""Fire-to-task latency of schedules, against a direct `POST /api/v1/tasks`, same run.

One nats-server from the wheel and one gateway process (SQLite), no dispatcher: the moment a task
is *started* by Agentix is the moment its message lands on the tasks work queue (what a
dispatcher takes next; from there both roads are the same). The bench listens on that subject.

  * schedules — `--schedules` schedules `every: 1s` (so that many fires each second) for
    `--seconds`: latency = the task message's arrival − the fire's own time in the schedules
    stream (`fired_at` in the fire history);
  * baseline — the same number of tasks per second posted directly (`POST /api/v1/tasks`, one
    request every 1/N s) for as long: latency = arrival − the moment the request was sent.

Prints p50/p99 of each and the ratio schedules / baseline (p50 and p99). Target (issue 35):
fire-to-task p99 ≤ 250 ms at 100 schedules firing each second.
Run:  python -m bench.triggers [--schedules 100] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

from bench.stats import pct
from services.gateway.embedded import GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.natsd import NatsServer, free_port
from shared.settings import Settings

DSL = {"version": "1", "nodes": [{"id": "in", "kind": "input"},
                                 {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}}],
       "edges": [{"source": "in", "target": "out"}]}  # fmt: skip


class Arrivals:
    """When each task message reached the tasks work queue's subject (wall clock, seconds)."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    async def listen(self, bus: Bus) -> None:
        async def got(msg: object) -> None:
            now = time.time()
            self.at[json.loads(msg.data)["task_id"]] = now  # type: ignore[attr-defined]

        await bus.nc.subscribe(bus.subjects.tasks_submit, cb=got)


async def baseline(client: httpx.AsyncClient, arrivals: Arrivals, rate: int, seconds: float) -> list[float]:
    sent: dict[str, float] = {}

    async def one(i: int) -> None:
        t0 = time.time()
        resp = await client.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": f"b{i}"}})
        resp.raise_for_status()
        sent[resp.json()["id"]] = t0

    loop = asyncio.get_running_loop()
    start = loop.time()
    pending = []
    for i in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
        pending.append(asyncio.create_task(one(i)))
    await asyncio.gather(*pending)
    await _until(lambda: all(t in arrivals.at for t in sent))
    return [(arrivals.at[t] - t0) * 1000 for t, t0 in sent.items()]


async def scheduled(client: httpx.AsyncClient, arrivals: Arrivals, count: int, seconds: float) -> list[float]:
    wid = (await client.post("/api/v1/workflows", json={"name": "bench", "dsl": DSL})).json()["id"]
    sids = []
    for i in range(count):
        resp = await client.post("/api/v1/schedules", json={"workflow_id": wid, "input": {"text": f"s{i}"},
                                                              "every": "1s", "max_concurrent": 1000})
        resp.raise_for_status()
        sids.append(resp.json()["id"])
    await asyncio.sleep(seconds)  # the load itself: the schedules fire on their own meanwhile
    for sid in sids:
        await client.post(f"/api/v1/schedules/{sid}/pause")
    fires: list[tuple[str, float]] = []
    for sid in sids:
        items = (await client.get(f"/api/v1/schedules/{sid}/fires", params={"limit": 500})).json()["items"]
        fires += [(f["task_id"], datetime.fromisoformat(f["fired_at"]).timestamp())
                  for f in items if f["outcome"] == "started" and f["task_id"]]
    await _until(lambda: all(t in arrivals.at for t, _ in fires))
    return [(arrivals.at[t] - fired) * 1000 for t, fired in fires]


async def _until(check: object, timeout_s: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():  # type: ignore[operator]
        if loop.time() > deadline:
            raise RuntimeError("task messages never arrived")
        await asyncio.sleep(0.05)


async def main(count: int, seconds: float) -> None:
    logging.basicConfig(level=logging.ERROR)
    nats = NatsServer().start()
    gateway: GatewayProcess | None = None
    bus: Bus | None = None
    try:
        settings = Settings(nats_servers=[nats.url], subject_prefix="benchtr", data_dir=Path(tempfile.mkdtemp()),
                            rate_limit_per_min=10_000_000, redis_url=None, llm_base_url=None,
                            jwt_secret="bench-triggers-secret-0123456789abcdef")
        gateway = await GatewayProcess(settings_env(settings), free_port()).start(timeout_s=120)
        bus = await Bus.connect(settings, name="bench")
        arrivals = Arrivals()
        await arrivals.listen(bus)
        headers = {"Authorization": f"Bearer {mint_token(settings, 'bench')}"}
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as client:
            base = await baseline(client, arrivals, count, seconds)
            fire = await scheduled(client, arrivals, count, seconds)
        for name, values in (("direct POST /tasks", base), ("schedule fire", fire)):
            print(f"{name:18s} p50 {statistics.median(values):7.1f} ms  p99 {pct(values, 0.99):7.1f} ms  "
                  f"(n={len(values)})")
        print(f"ratio schedule / POST: p50 {statistics.median(fire) / statistics.median(base):.2f}x  "
              f"p99 {pct(fire, 0.99) / pct(base, 0.99):.2f}x")
        print(f"target p99 <= 250 ms: {'met' if pct(fire, 0.99) <= 250 else 'NOT met'}")
    finally:
        if bus is not None:
            await bus.close()
        if gateway is not None:
            await gateway.stop()
        nats.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(main(args.schedules, args.seconds))
