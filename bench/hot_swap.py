"""Hot swap of the model chain: `PUT /api/v1/admin/models/chain` on the gateway → two replicas
(ControlPlane watchers, as every dispatcher runs one) applying the new revision, p50/p99 over
50 swaps, vs a raw NATS publish → receive at two subscribers, same server, same run.

Two figures for the swap:
  * from the PUT returning (the issue's definition; the gateway puts to KV and broadcasts before
    it answers, so replicas have often applied it already: then the time is 0) — target p99 ≤ 10×;
  * end to end, from sending the PUT (HTTP, auth, DB commit, KV put, broadcast) — for context.
The gateway runs as its own process (as deployed).
Run: python -m bench.hot_swap [--swaps 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.stats import pct
from services.gateway.embedded import GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.natsd import NatsServer, free_port
from shared.settings import Settings


class Replica:
    """A subscriber that records when each chain revision was applied."""

    def __init__(self, bus: Bus) -> None:
        self.plane = ControlPlane(bus)
        self.applied: dict[int, float] = {}
        self.changed = asyncio.Event()

    async def start(self) -> None:
        await self.plane.watch(self._apply)

    def _apply(self, key: str, value: Any, revision: int) -> None:
        if key == "models.chain":
            self.applied.setdefault(int(value["revision"]), time.perf_counter())
            self.changed.set()

    async def wait_for(self, revision: int) -> float:
        while revision not in self.applied:
            self.changed.clear()
            await self.changed.wait()
        return self.applied[revision]


async def raw_baseline(buses: list[Bus], rounds: int) -> list[float]:
    """Publish on one connection → both subscribers received (ms)."""
    subject = "bench.raw.chain"
    got: list[asyncio.Queue[float]] = [asyncio.Queue(), asyncio.Queue()]
    for bus, queue in zip(buses[1:], got, strict=True):

        async def on_msg(_msg: Any, queue: asyncio.Queue[float] = queue) -> None:
            queue.put_nowait(time.perf_counter())

        await bus.nc.subscribe(subject, cb=on_msg)
        await bus.nc.flush()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await buses[0].nc.publish(subject, b'{"active":"a","fallbacks":["b"],"revision":1}')
        done = max([await q.get() for q in got])
        samples.append((done - start) * 1000)
    return samples


async def main(swaps: int) -> None:
    server = NatsServer().start()
    settings = Settings(
        nats_servers=[server.url], subject_prefix="swapbench", data_dir=Path(tempfile.mkdtemp(prefix="swap-"))
    )
    gateway = await GatewayProcess(settings_env(settings), free_port()).start()
    buses = [await Bus.connect(settings, name=f"replica{i}") for i in range(3)]
    try:
        replicas = [Replica(buses[1]), Replica(buses[2])]
        for replica in replicas:
            await replica.start()
        headers = {"Authorization": f"Bearer {mint_token(settings, 'root', admin=True)}"}
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as client:
            for name in ("a", "b"):
                body = {"name": name, "base_url": "http://127.0.0.1:9/v1", "model": name}
                (await client.post("/api/v1/admin/models", json=body)).raise_for_status()
            after_return: list[float] = []
            end_to_end: list[float] = []
            for i in range(swaps + 5):  # the first 5 warm up connections and caches
                order = ["a", "b"] if i % 2 else ["b", "a"]
                sent = time.perf_counter()
                resp = await client.put("/api/v1/admin/models/chain", json={"active": order[0], "fallbacks": order[1:]})
                returned = time.perf_counter()
                resp.raise_for_status()
                revision = resp.json()["revision"]
                applied = max([await r.wait_for(revision) for r in replicas])
                if i >= 5:
                    after_return.append(max(0.0, applied - returned) * 1000)
                    end_to_end.append((applied - sent) * 1000)
        raw = await raw_baseline(buses, swaps)
        raw50, raw99 = statistics.median(raw), pct(raw, 0.99)
        ret50, ret99 = statistics.median(after_return), pct(after_return, 0.99)
        e2e50, e2e99 = statistics.median(end_to_end), pct(end_to_end, 0.99)
        print(f"swaps: {swaps}, replicas: 2")
        print(f"raw NATS publish→both received:   p50 {raw50:7.3f} ms   p99 {raw99:7.3f} ms")
        print(f"PUT returned → both applied:      p50 {ret50:7.3f} ms   p99 {ret99:7.3f} ms")
        print(f"PUT sent → both applied (e2e):    p50 {e2e50:7.3f} ms   p99 {e2e99:7.3f} ms")
        print(f"ratio p99 (from return) / raw:    {ret99 / raw99:.2f}x   (target <= 10x)")
        print(f"ratio p99 (end to end) / raw:     {e2e99 / raw99:.2f}x   (context: includes HTTP + DB commit)")
    finally:
        for bus in buses:
            await bus.close()
        await gateway.stop()
        server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--swaps", type=int, default=50)
    asyncio.run(main(parser.parse_args().swaps))
