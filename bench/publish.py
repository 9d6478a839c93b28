"""Pipelined JetStream publishes: `shared/bus/pipelined.py` against nats-py's `publish_async`,
the same server (the embedded one, syncing every write), the same messages, taking turns.

Each round publishes `--messages` token-sized events with a `Nats-Msg-Id`, `--inflight` at a
time, and settles each group's acks as `EventPublisher` does (`retry.settled`). Printed: the
client's CPU per publish and ack (`time.process_time`: user + sys of this process), and the ratio of ours to
nats-py's (lower is better). The server's CPU is the same for both: the same stores and syncs.
Run: python -m bench.publish [--messages 5000] [--inflight 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import nats
from nats.js.api import PubAck

from shared.bus.pipelined import pipeline_for
from shared.bus.retry import settled
from shared.natsd import NatsServer

PAYLOAD = (b'{"task_id":"t_01a23c768d33c3538fe215","n":5,"ts":"2026-12-03T15:12:12.090725Z","node_id":"a1",'
           b'"text":"Each agent reads what the one before it wrote","model":"m","type":"token"}')
Publish = Callable[[str, bytes, dict[str, str]], Awaitable[asyncio.Future[PubAck]]]


async def round_us(publish: Publish, tag: str, messages: int, inflight: int) -> float:
    """Client CPU µs per publish and ack."""
    start = time.process_time()  # this process's user + sys CPU, finer than /proc's ticks
    pending: list[asyncio.Future[PubAck]] = []
    for i in range(messages):
        pending.append(await publish(f"bench.t{i % 50}.token", PAYLOAD, {"Nats-Msg-Id": f"{tag}:{i}"}))
        if len(pending) >= inflight:
            for ack in pending:
                await settled(ack)
            pending = []
    for ack in pending:
        await settled(ack)
    return (time.process_time() - start) / messages * 1e6


async def main(messages: int, inflight: int, rounds: int) -> None:
    server = NatsServer(Path(tempfile.mkdtemp(prefix="bench-publish-"))).start()
    nc = await nats.connect(server.url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="BENCH", subjects=["bench.>"])
        ours = pipeline_for(nc).publish

        async def theirs(subject: str, payload: bytes, headers: dict[str, str]) -> asyncio.Future[PubAck]:
            return await js.publish_async(subject, payload, headers=headers)

        await round_us(ours, "warm-ours", 200, inflight)
        await round_us(theirs, "warm-theirs", 200, inflight)
        got: dict[str, list[float]] = {"pipelined": [], "publish_async": []}
        for r in range(rounds):
            stamp = time.time_ns()
            got["publish_async"].append(await round_us(theirs, f"t{r}-{stamp}", messages, inflight))
            got["pipelined"].append(await round_us(ours, f"o{r}-{stamp}", messages, inflight))
        for name, values in got.items():
            print(f"{name:14s} client CPU per publish and ack: {' '.join(f'{v:.1f}' for v in values)} µs")
        ratio = statistics.median(got["pipelined"]) / statistics.median(got["publish_async"])
        print(f"RATIO client CPU per publish, pipelined / publish_async = {ratio:.2f}x (lower is better)")
    finally:
        await nc.close()
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--inflight", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.messages, args.inflight, args.rounds))
