"""Tool call through shared/bus vs a raw nats-py request, same server, same run.

Prints p50 latency of sequential calls (target ≤ 1.2×) and throughput with 100 requests in flight
(target ≥ 0.8×) for two baselines:
  A. the same echo tool endpoint (served by shared.bus.tools) called with a raw nats-py request —
     isolates the client side (contract encode/decode, trace headers, error mapping);
  B. a bare nats-py echo responder — the whole stack (micro service, bounded tasks, validation).
Run: python -m bench.bus_rpc [--calls 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from shared.bus import Bus
from shared.bus.tools import ToolClient, ToolContext, ToolRegistry, serve_tools
from shared.contract.tools import ToolRequest
from shared.natsd import NatsServer
from shared.settings import Settings


class EchoArgs(BaseModel):
    text: str


async def p50_us(call, n: int) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples)


async def throughput(call, n: int, inflight: int = 100) -> float:
    sem = asyncio.Semaphore(inflight)

    async def one() -> None:
        async with sem:
            await call()

    t = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return n / (time.perf_counter() - t)


async def main(calls: int) -> None:
    server = NatsServer().start()
    try:
        settings = Settings(nats_servers=[server.url], subject_prefix="bench", data_dir=Path(tempfile.mkdtemp()))
        bus = await Bus.connect(settings, "bench")
        registry = ToolRegistry("go")

        @registry.tool(name="echo", title="Echo", description="echo")
        async def echo(args: EchoArgs, ctx: ToolContext) -> dict:
            return {"text": args.text}

        await serve_tools(bus, registry, concurrency=128)

        async def raw_echo(msg) -> None:
            await msg.respond(msg.data)

        await bus.nc.subscribe("bench.raw.echo", queue="q", cb=raw_echo)
        client = ToolClient(bus)
        await client.list_tools()
        payload = ToolRequest(args={"text": "hello"}).model_dump_json().encode()
        subject = bus.subjects.tool("go", "echo")

        async def via_bus() -> None:
            reply = await client.call("echo", {"text": "hello"})
            assert reply.ok

        async def raw_same_endpoint() -> None:
            await bus.nc.request(subject, payload, timeout=5)

        async def raw_bare() -> None:
            await bus.nc.request("bench.raw.echo", payload, timeout=5)

        for fn in (via_bus, raw_same_endpoint, raw_bare):  # warm up
            await p50_us(fn, 200)
        lat = {fn.__name__: await p50_us(fn, calls) for fn in (raw_bare, raw_same_endpoint, via_bus)}
        thr = {fn.__name__: await throughput(fn, calls * 2) for fn in (raw_bare, raw_same_endpoint, via_bus)}
        print(f"sequential p50 µs: bus={lat['via_bus']:.0f} raw(same endpoint)={lat['raw_same_endpoint']:.0f} "
              f"raw(bare echo)={lat['raw_bare']:.0f}")
        print(f"throughput req/s (100 in flight): bus={thr['via_bus']:.0f} "
              f"raw(same endpoint)={thr['raw_same_endpoint']:.0f} raw(bare echo)={thr['raw_bare']:.0f}")
        print(f"RATIO p50 latency bus/raw same endpoint = {lat['via_bus'] / lat['raw_same_endpoint']:.2f}x "
              f"(target <= 1.2x); vs bare echo = {lat['via_bus'] / lat['raw_bare']:.2f}x")
        print(f"RATIO throughput bus/raw same endpoint = {thr['via_bus'] / thr['raw_same_endpoint']:.2f}x "
              f"(target >= 0.8x); vs bare echo = {thr['via_bus'] / thr['raw_bare']:.2f}x")
        await bus.close()
    finally:
        server.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3000)
    asyncio.run(main(parser.parse_args().calls))
