"""Failover times, each printed against the heartbeat interval (target ≤ 2× for each):

  * takeover — SIGKILL the dispatcher process running a task (slow streaming model, two
    dispatchers, one embedded server) → the task's next event, from the other dispatcher;
    p50/max over `--rounds`;
  * election stall — a publisher storing one event after another on a 3-node cluster (replicas 3);
    SIGKILL the server leading the events stream → the longest gap between two stored events
    (no publish may fail); p50/max over `--rounds`, a new cluster each round;
  * resume — restart the one embedded server under a streaming task (one dispatcher) → the
    task's next event after the server is back; p50/max over `--rounds`.

The heartbeat defaults to the deployment default (`AGENTIX_HEARTBEAT_INTERVAL_S`, 5 s). JetStream's
own election timers are fixed, so a shorter heartbeat makes the stall a larger multiple of it.

Run: python -m bench.failover [--rounds 10] [--heartbeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from shared.bus import Bus
from shared.bus.events import EventPublisher
from shared.bus.tools import ToolRegistry, serve_tools
from shared.contract.events import TokenEvent
from shared.contract.heartbeat import Heartbeat
from shared.natsd import NatsServer
from shared.settings import Settings
from tests.support import faults
from tests.support.cluster import NatsCluster
from tests.support.openai_server import OpenAIServer
from tests.support.wait import eventually

# Seconds between the model's chunks, per second of heartbeat: a task's two answers (38 chunks)
# then stream for about four heartbeats, so a heartbeat shows who runs it well before it ends.
CHUNK_DELAY_PER_HEARTBEAT = 0.1


def settings_for(urls: list[str], data: Path, heartbeat_s: float, replicas: int = 1) -> Settings:
    return Settings(nats_servers=urls, subject_prefix=f"fo{time.monotonic_ns() % 10**8}", data_dir=data,
                    heartbeat_interval_s=heartbeat_s, js_replicas=replicas, llm_base_url=None, redis_url=None,
                    otlp_endpoint=None, events_max_bytes=64 * 1024 * 1024)


@contextlib.asynccontextmanager
async def deployment(settings: Settings, srv: OpenAIServer) -> AsyncIterator[Bus]:
    bus = await Bus.connect(settings, name="bench")
    await bus.declare()
    await faults.use_model_server(bus, srv)
    tools = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
    try:
        yield bus
    finally:
        for server in tools:
            await server.drain()
        await bus.close()


async def owner_of_work(bus: Bus, procs: list[subprocess.Popen[bytes]],
                        task: faults.LiveTask) -> subprocess.Popen[bytes]:
    """The dispatcher whose heartbeat says it runs a task (there is one task)."""
    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"))
    try:
        while not task.done:
            beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=60)).data)
            if beat.load.inflight > 0:
                pid = int(beat.instance.split("-")[-2])
                return next(p for p in procs if p.pid == pid)
        raise RuntimeError(f"task {task.task_id} ended before a heartbeat named its dispatcher")
    finally:
        await sub.unsubscribe()


async def takeover(rounds: int, heartbeat_s: float, root: Path, srv: OpenAIServer) -> list[float]:
    server = NatsServer(store_dir=root / "takeover-nats").start()
    times: list[float] = []
    try:
        settings = settings_for([server.url], root / "takeover", heartbeat_s)
        async with deployment(settings, srv) as bus:
            procs = faults.start_dispatchers(settings, root, 2)
            try:
                for i in range(rounds):
                    await faults.dispatchers_alive(bus, procs)
                    [task] = await faults.submit_tasks(bus, f"takeover{i}", 1)
                    await faults.all_streaming([task])
                    victim = await owner_of_work(bus, procs, task)
                    victim.send_signal(signal.SIGKILL)
                    killed = time.monotonic()
                    await asyncio.to_thread(victim.wait)
                    await faults.all_done([task])
                    times.append((task.first_event_after(killed) or float("inf")) - killed)
                    procs.remove(victim)  # keep two dispatchers for the next round
                    (root / f"round{i}").mkdir()
                    procs += faults.start_dispatchers(settings, root / f"round{i}", 1)
            finally:
                await faults.stop_all(procs)
    finally:
        server.cleanup()
    return times


async def at_least(stored: list[float], count: int) -> None:
    async def check() -> bool:
        return len(stored) >= count

    await eventually(check, attempts=6000)


async def election_stall(heartbeat_s: float, root: Path) -> float:
    cluster = await NatsCluster(root=root / "cluster").start()
    try:
        settings = settings_for(cluster.urls, root / "stall", heartbeat_s, replicas=3)
        bus = await Bus.connect(settings, name="bench")
        await bus.declare()
        publisher = EventPublisher(bus, "stall")
        stored: list[float] = []
        stop = asyncio.Event()

        async def publish() -> None:
            while not stop.is_set():
                await publisher.emit(TokenEvent(task_id="stall", node_id="n", text="x"))
                await publisher.flush()
                stored.append(time.monotonic())

        runner = asyncio.create_task(publish())
        await at_least(stored, 50)
        leader = await cluster.leader_of(bus.names.events_stream)
        cluster.node(leader).kill()
        killed_at = len(stored)
        await at_least(stored, killed_at + 50)
        stop.set()
        await runner
        await bus.close()
        return max(b - a for a, b in itertools.pairwise(stored))
    finally:
        cluster.cleanup()


async def resume(rounds: int, heartbeat_s: float, root: Path, srv: OpenAIServer) -> list[float]:
    server = NatsServer(store_dir=root / "resume-nats").start()
    times: list[float] = []
    try:
        settings = settings_for([server.url], root / "resume", heartbeat_s)
        async with deployment(settings, srv) as bus:
            procs = faults.start_dispatchers(settings, root, 1)
            try:
                await faults.dispatchers_alive(bus, procs)
                for i in range(rounds):
                    [task] = await faults.submit_tasks(bus, f"resume{i}", 1)
                    await faults.all_streaming([task])
                    await asyncio.to_thread(server.restart)
                    back = time.monotonic()
                    await faults.all_done([task])
                    times.append((task.first_event_after(back) or float("inf")) - back)
            finally:
                await faults.stop_all(procs)
    finally:
        server.cleanup()
    return times


def line(name: str, values: list[float], heartbeat_s: float) -> str:
    p50, worst = statistics.median(values), max(values)
    verdict = "ok" if worst <= 2 * heartbeat_s else "OVER"
    return (f"{name:<16} p50 {p50:6.2f} s  max {worst:6.2f} s  = {worst / heartbeat_s:4.2f}× heartbeat "
            f"(target ≤ 2×: {verdict})  n={len(values)}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--heartbeat", type=float, default=Settings.model_fields["heartbeat_interval_s"].default)
    args = parser.parse_args()
    hb = args.heartbeat
    srv = OpenAIServer().start_in_thread()
    faults.script_slow_model(srv, delay_s=CHUNK_DELAY_PER_HEARTBEAT * hb)
    try:
        with tempfile.TemporaryDirectory(prefix="agentix-failover-") as tmp:
            root = Path(tmp)
            print(f"heartbeat interval {hb:g} s, ack wait {1.5 * hb:g} s (derived)", flush=True)
            print(line("takeover", await takeover(args.rounds, hb, root, srv), hb), flush=True)
            stalls = [await election_stall(hb, root / f"stall{i}") for i in range(args.rounds)]
            print(line("election stall", stalls, hb), flush=True)
            print(line("resume", await resume(args.rounds, hb, root, srv), hb), flush=True)
    finally:
        srv.stop_thread()


if __name__ == "__main__":
    asyncio.run(main())
