"""Replaying one task's 10,000 events: through the gateway's SSE endpoint (HTTP, auth,
ownership check, SSE framing) vs reading them straight from JetStream with
`shared.bus.events.read_events`, same server, same run. Target: SSE ≥ 0.5× the direct rate.

The gateway runs as its own process (as deployed); both readers run in this process.
Run: python -m bench.sse_replay [--events 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from services.gateway.embedded import GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events
from shared.contract.events import DoneEvent, StatusEvent, TokenEvent
from shared.natsd import NatsServer, free_port
from shared.settings import Settings

DSL = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
        {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}},
    ],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}


async def direct(bus: Bus, task_id: str) -> int:
    count = 0
    async for _seq, _event in read_events(bus, task_id):
        count += 1
    return count


async def via_sse(client: httpx.AsyncClient, task_id: str) -> int:
    """Counts complete SSE frames (blank-line terminated) as they arrive."""
    count = 0
    tail = b""
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as resp:
        resp.raise_for_status()
        async for chunk in resp.aiter_raw():
            buffer = tail + chunk
            frames = buffer.split(b"\n\n")
            tail = frames.pop()
            count += sum(1 for f in frames if b"\ndata: " in f)
    return count


async def timed(fn, *args) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    count = await fn(*args)
    return time.perf_counter() - start, count


async def main(events: int, rounds: int) -> None:
    server = NatsServer().start()
    data_dir = Path(tempfile.mkdtemp(prefix="sse-bench-"))
    settings = Settings(
        nats_servers=[server.url], subject_prefix="ssebench", data_dir=data_dir, rate_limit_per_min=1_000_000
    )
    gateway = await GatewayProcess(settings_env(settings), free_port()).start()
    bus = await Bus.connect(settings, name="bench")
    try:
        headers = {"Authorization": f"Bearer {mint_token(settings, 'bench')}"}
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=120) as client:
            resp = await client.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "q"}})
            task_id = resp.json()["id"]
            pub = EventPublisher(bus, task_id)
            await pub.emit(StatusEvent(task_id=task_id, status="running"))
            for i in range(events - 2):
                await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text=f"token{i} "))
            await pub.emit(DoneEvent(task_id=task_id, status="done", output="…"))
            await pub.flush()

            direct_rates, sse_rates = [], []
            for _ in range(rounds):
                seconds, count = await timed(direct, bus, task_id)
                assert count == events, count
                direct_rates.append(count / seconds)
                seconds, count = await timed(via_sse, client, task_id)
                assert count == events, count
                sse_rates.append(count / seconds)
        d, s = statistics.median(direct_rates), statistics.median(sse_rates)
        print(f"events per replay:          {events}")
        print(f"direct JetStream replay:    {d:,.0f} events/s (median of {rounds})")
        print(f"gateway SSE replay:         {s:,.0f} events/s (median of {rounds})")
        print(f"ratio SSE / direct:         {s / d:.2f}x   (target >= 0.5x)")
    finally:
        await bus.close()
        await gateway.stop()
        server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.rounds))
