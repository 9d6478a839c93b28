"""What starting a task through an inbound webhook costs, against `POST /api/v1/tasks`, same run.

One gateway (in-process, uvicorn on a free port, NATS from the wheel, SQLite), one saved workflow
and a hook on it. Interleaved request by request (so both see the same machine load): a direct
`POST /api/v1/tasks {workflow_id, input}` with a bearer token, and a call to `/hooks/{id}` signed
with the real `standardwebhooks` library (a fresh `webhook-id` each: each call starts a task).
The latency is to the 202 (the task's row written and its message queued); no dispatcher runs,
so the tasks only queue. The hook's extra steps: the hook's row, its secret decrypted, the HMAC,
the input mapping, the idempotency key's row. Prints p50/p90 of each and the ratio hook / direct.
Run:  python -m bench.hooks [--requests 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from standardwebhooks import Webhook

from bench.stats import pct
from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.natsd import NatsServer
from shared.settings import Settings

ECHO: dict[str, Any] = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"}, {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}}],
    "edges": [{"source": "in", "target": "out"}],
}


async def timed(client: httpx.AsyncClient, path: str, body: bytes, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    resp = await client.post(path, content=body, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    if resp.status_code != 202:
        raise RuntimeError(f"{path}: {resp.status_code}: {resp.text}")
    return elapsed


async def main(requests: int) -> None:
    logging.basicConfig(level=logging.ERROR)
    nats = NatsServer().start()
    gateway: EmbeddedGateway | None = None
    try:
        settings = Settings(nats_servers=[nats.url], subject_prefix="bench", data_dir=Path(tempfile.mkdtemp()),
                            rate_limit_per_min=10_000_000, hook_rate_limit_per_min=10_000_000, redis_url=None,
                            llm_base_url=None)  # fmt: skip
        gateway = await EmbeddedGateway(settings).start(wait_for_bus=True)
        jwt = {"Authorization": f"Bearer {mint_token(settings, 'bench')}", "content-type": "application/json"}
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
            wf = (await client.post("/api/v1/workflows", json={"name": "b", "dsl": ECHO}, headers=jwt)).json()["id"]
            hook = (await client.post("/api/v1/hooks", json={"name": "b", "workflow_id": wf,
                                                             "input_mapping": {"text": "$.body.text"}},
                                      headers=jwt)).json()  # fmt: skip
            signer = Webhook(hook["secret"])
            direct_body = json.dumps({"workflow_id": wf, "input": {"text": "x"}}).encode()
            hook_body = json.dumps({"text": "x"}).encode()

            def signed() -> dict[str, str]:
                msg_id, at = uuid.uuid4().hex, datetime.now(UTC)
                return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())),
                        "webhook-signature": signer.sign(msg_id, at, hook_body), "content-type": "application/json"}

            async def one(name: str) -> float:
                if name == "direct":
                    return await timed(client, "/api/v1/tasks", direct_body, jwt)
                return await timed(client, hook["url"], hook_body, signed())

            for _ in range(50):  # warm up both roads
                await one("direct")
                await one("hook")
            samples: dict[str, list[float]] = {"direct": [], "hook": []}
            for i in range(requests):
                for name in (("direct", "hook") if i % 2 else ("hook", "direct")):
                    samples[name].append(await one(name))
        for name, values in samples.items():
            p50, p90 = statistics.median(values), pct(values, 0.9)
            print(f"{name:6s} p50 {p50:6.3f} ms  p90 {p90:6.3f} ms  (n={len(values)})")
        ratio = statistics.median(samples["hook"]) / statistics.median(samples["direct"])
        print(f"ratio hook / direct POST /tasks p50: {ratio:.2f}x")
    finally:
        if gateway is not None:
            await gateway.stop()
        nats.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    asyncio.run(main(parser.parse_args().requests))
