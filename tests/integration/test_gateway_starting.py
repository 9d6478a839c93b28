"""The gateway started before NATS answers: it serves HTTP at once, `/ready` answers 503
"starting" and says what it waits for, routes that need the bus answer 503 rather than fail, and
once NATS is up (and a dispatcher, itself started before NATS, beats) `/ready` turns 200."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.natsd import free_port
from tests.conftest import drop_deployment, make_settings
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer
from tests.support.wait import eventually


async def test_ready_says_starting_and_why_until_nats_answers_then_turns_200(tmp_path: Path) -> None:
    port = free_port()
    settings = make_settings(f"nats://127.0.0.1:{port}", tmp_path / "data", nats_connect_timeout_s=1.0,
                             heartbeat_interval_s=0.5)
    async with asyncio.timeout(60):  # it listens while NATS is down: no waiting for the bus first
        gw = await EmbeddedGateway(settings).start(wait_for_bus=False)
    admin = {"Authorization": f"Bearer {mint_token(settings, 'root', admin=True)}"}
    server: NatsServer | None = None
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client, dispatcher(settings):
            assert (await client.get("/health")).status_code == 200  # alive: nothing to restart

            async def said_why() -> dict[str, Any] | None:
                resp = await client.get("/ready")
                assert resp.status_code == 503, resp.text
                body = resp.json()
                return body if body["checks"]["start"].get("detail", "").startswith("waiting for NATS") else None

            body = await eventually(said_why, attempts=600, every_s=0.05)
            assert body["state"] == "starting" and "start" in body["failed"]
            assert body["detail"].startswith(f"Starting: waiting for NATS: NATS not reachable at nats://127.0.0.1:{port}")
            assert body["checks"]["start"]["phase"] == "connecting"
            # Routes that need the bus say so; the status page still answers (`agentix status`).
            refused = await client.put("/api/v1/admin/pricing", json={"models": {}}, headers=admin)
            assert refused.status_code == 503 and "not yet broadcast" in refused.json()["detail"], refused.text
            status = await client.get("/api/v1/admin/status", headers=admin)
            assert status.status_code == 200, status.text
            assert status.json()["infrastructure"]["gateway"]["state"] == "starting"

            server = NatsServer(port=port).start()

            async def ready() -> dict[str, Any] | None:
                resp = await client.get("/ready")
                return resp.json() if resp.status_code == 200 else None

            body = await eventually(ready, attempts=1200, every_s=0.05)
            assert body["checks"]["start"] == {"ok": True, "state": "serving"}
            assert gw.app is not None and gw.app.state.bus is not None
            await drop_deployment(gw.app.state.bus)
    finally:
        await gw.stop()
        if server is not None:
            server.cleanup()
