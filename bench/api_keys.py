"""What an API key costs a request, against the bearer JWT, same run.

One gateway (in-process, uvicorn on a free port, NATS from the wheel, SQLite) and one user with
a bearer token and an API key; `GET /api/v1/users/me` with each, interleaved request by request
(so both see the same machine load). Prints p50/p90 of each and the ratio key / JWT: a key is
read from the database once, then kept (until revoked: the revocation is broadcast), so its
steady cost is an HMAC and a dict lookup, as a token's verification is kept. The first use of a
key (its database read) is measured apart, as `cold`.
Run:  python -m bench.api_keys [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.stats import pct
from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.natsd import NatsServer
from shared.settings import Settings

PATH = "/api/v1/users/me"


async def timed(client: httpx.AsyncClient, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    resp = await client.get(PATH, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    if resp.status_code != 200:
        raise RuntimeError(f"{resp.status_code}: {resp.text}")
    return elapsed


async def main(requests: int) -> None:
    logging.basicConfig(level=logging.ERROR)
    nats = NatsServer().start()
    gateway: EmbeddedGateway | None = None
    try:
        settings = Settings(nats_servers=[nats.url], subject_prefix="bench", data_dir=Path(tempfile.mkdtemp()),
                            rate_limit_per_min=10_000_000, redis_url=None, llm_base_url=None)
        gateway = await EmbeddedGateway(settings).start(wait_for_bus=True)
        jwt = {"Authorization": f"Bearer {mint_token(settings, 'bench')}"}
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            made = await client.post("/api/v1/keys", json={"name": "bench"}, headers=jwt)
            made.raise_for_status()
            key = {"Authorization": f"Bearer {made.json()['key']}"}
            cold: list[float] = []
            for i in range(20):  # a key's first use reads the database: new keys each time
                fresh = (await client.post("/api/v1/keys", json={"name": f"cold{i}"}, headers=jwt)).json()["key"]
                cold.append(await timed(client, {"Authorization": f"Bearer {fresh}"}))
            for _ in range(200):  # warm up both roads
                await timed(client, jwt)
                await timed(client, key)
            samples: dict[str, list[float]] = {"jwt": [], "key": []}
            for i in range(requests):
                order = (("jwt", jwt), ("key", key)) if i % 2 else (("key", key), ("jwt", jwt))
                for name, headers in order:
                    samples[name].append(await timed(client, headers))
        for name, values in samples.items():
            p50, p90 = statistics.median(values), pct(values, 0.9)
            print(f"{name:4s} p50 {p50:6.3f} ms  p90 {p90:6.3f} ms  (n={len(values)})")
        print(f"cold key (first use, a database read) p50 {statistics.median(cold):6.3f} ms (n={len(cold)})")
        ratio = statistics.median(samples["key"]) / statistics.median(samples["jwt"])
        print(f"ratio key / JWT p50: {ratio:.2f}x")
    finally:
        if gateway is not None:
            await gateway.stop()
        nats.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    asyncio.run(main(parser.parse_args().requests))
