"""Completion callbacks over a real gateway, NATS, dispatcher and a real HTTP receiver: a task
naming a webhook has its result POSTed, signed (verified here with the real `standardwebhooks`
library), retried after the receiver answers 500 twice, logged, redelivered on demand; a
private or loopback target is refused unless allowed."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from standardwebhooks import Webhook

from services.gateway.embedded import EmbeddedGateway, GatewayProcess, settings_env
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import DoneEvent
from shared.settings import Settings
from tests.support.dispatcher import dispatcher
from tests.support.wait import eventually

ECHO: dict[str, Any] = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"}, {"id": "out", "kind": "output", "config": {"value": "{{ in.text }}"}}],
    "edges": [{"source": "in", "target": "out"}],
}


class Receiver:
    """A real HTTP server that answers each POST with the next scripted status (then 200)."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[dict[str, str], bytes, int]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        status = self.answers.pop(0) if self.answers else 200
        self.calls.append(({k.lower(): v for k, v in request.headers.items()}, body, status))
        return web.Response(status=status)

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/cb", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/cb"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@pytest.fixture
async def gw(settings: Settings) -> AsyncIterator[EmbeddedGateway]:
    gateway = await EmbeddedGateway(settings.model_copy(update={
        "rate_limit_per_min": 100_000, "callback_allow_private": True, "callback_retry_first_s": 0.2,
        "callback_retry_max_s": 1.0})).start()  # fmt: skip
    try:
        async with dispatcher(gateway.settings):
            yield gateway
    finally:
        await gateway.stop()


async def delivered(client: httpx.AsyncClient, task_id: str, attempts: int) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        items = (await client.get(f"/api/v1/tasks/{task_id}/deliveries")).json()["items"]
        return items[0] if items and items[0]["status"] == "delivered" and items[0]["attempts"] >= attempts else None

    return await eventually(check, attempts=1500)


async def test_a_callback_is_signed_retried_after_two_500s_logged_and_redelivered(gw: EmbeddedGateway) -> None:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    async with Receiver([500, 500]) as rx, httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=30) as c:
        resp = await c.post("/api/v1/tasks", json={"dsl": ECHO, "input": {"text": "hi"}, "webhook": rx.url})
        assert resp.status_code == 202, resp.text
        task_id = resp.json()["id"]
        row = await delivered(c, task_id, 3)
        assert row["attempts"] == 3 and row["last_status_code"] == 200 and row["last_error"] is None
        assert [status for _, _, status in rx.calls] == [500, 500, 200]
        secret = (await c.get("/api/v1/callbacks/secret")).json()["secret"]
        for hdrs, body, _ in rx.calls:
            assert hdrs["webhook-id"] == row["id"]  # the same id on every attempt: receivers dedupe on it
            sent = Webhook(secret).verify(body, hdrs)  # raises on a bad signature
            assert sent["type"] == "task.done"
            assert sent["data"]["task_id"] == task_id and sent["data"]["output"] == {"out": "hi"}
        with pytest.raises(Exception):  # noqa: B017  (the library's own error type)
            Webhook(secret).verify(rx.calls[0][1] + b" ", rx.calls[0][0])
        listed = (await c.get("/api/v1/callbacks", params={"task_id": task_id})).json()["items"]
        assert [d["id"] for d in listed] == [row["id"]]

        again = await c.post(f"/api/v1/callbacks/{row['id']}/redeliver")
        assert again.status_code == 202, again.text
        await delivered(c, task_id, 4)
        assert len(rx.calls) == 4 and rx.calls[3][0]["webhook-id"] == row["id"]
        assert json.loads(rx.calls[3][1])["data"]["task_id"] == task_id
        async with httpx.AsyncClient(base_url=gw.url, timeout=30,
                                     headers={"Authorization": f"Bearer {mint_token(gw.settings, 'bob')}"}) as bob:
            assert (await bob.get(f"/api/v1/callbacks/{row['id']}")).status_code == 404
            assert (await bob.get("/api/v1/callbacks/secret")).json()["secret"] != secret


async def test_private_and_bad_targets_are_refused_naming_the_field(settings: Settings) -> None:
    gateway = await EmbeddedGateway(settings).start()
    try:
        headers = {"Authorization": f"Bearer {mint_token(settings, 'alice')}"}
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as c:
            for url, why in [("http://127.0.0.1:9/cb", "private or loopback"), ("http://10.0.0.8/cb", "private"),
                             ("ftp://example.com/x", "scheme"), ("http://u:p@example.com/", "credentials")]:
                resp = await c.post("/api/v1/tasks", json={"dsl": ECHO, "input": {"text": "x"}, "webhook": url})
                assert resp.status_code == 422, (url, resp.text)
                assert "webhook" in resp.json()["detail"] and why in resp.json()["detail"], resp.json()
            assert (await c.get("/api/v1/tasks")).json()["items"] == []
    finally:
        await gateway.stop()


class HoldingReceiver(Receiver):
    """Holds the first POST unanswered (the gateway is killed meanwhile), answers 200 after."""

    def __init__(self) -> None:
        super().__init__([])
        self.first = asyncio.Event()
        self._never = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.Response:
        if not self.first.is_set():
            self.first.set()
            await request.read()
            await self._never.wait()
        return await super()._handle(request)

    async def __aexit__(self, *exc: object) -> None:
        self._never.set()  # the held POST's handler ends: the server's cleanup would wait for it (60 s)
        await super().__aexit__(*exc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_gateway_killed_mid_delivery_loses_nothing(settings: Settings) -> None:
    env = settings_env(settings) | {"AGENTIX_CALLBACK_ALLOW_PRIVATE": "true", "AGENTIX_CALLBACK_ACK_WAIT_S": "2",
                                    "AGENTIX_CALLBACK_TIMEOUT_S": "60", "AGENTIX_CALLBACK_RETRY_FIRST_S": "0.2"}
    headers = {"Authorization": f"Bearer {mint_token(settings, 'alice')}"}
    first = await GatewayProcess(env, _free_port()).start(timeout_s=60)
    second: GatewayProcess | None = None
    try:
        async with HoldingReceiver() as rx, dispatcher(settings):
            async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=30) as c:
                resp = await c.post("/api/v1/tasks", json={"dsl": ECHO, "input": {"text": "k"}, "webhook": rx.url})
                assert resp.status_code == 202, resp.text
                task_id = resp.json()["id"]
            await asyncio.wait_for(rx.first.wait(), 60)  # the attempt is in flight in `first`
            assert first._proc is not None
            first._proc.send_signal(signal.SIGKILL)
            await first._proc.wait()
            second = await GatewayProcess(env, _free_port()).start(timeout_s=60)
            async with httpx.AsyncClient(base_url=second.url, headers=headers, timeout=30) as c:
                row = await delivered(c, task_id, 1)
                secret = (await c.get("/api/v1/callbacks/secret")).json()["secret"]
            assert [status for _, _, status in rx.calls] == [200]  # answered once, after the kill
            hdrs, body, _ = rx.calls[0]
            assert hdrs["webhook-id"] == row["id"]
            assert Webhook(secret).verify(body, hdrs)["data"]["output"] == {"out": "k"}
    finally:
        await first.stop()
        if second is not None:
            await second.stop()


async def test_a_task_that_ends_while_no_gateway_runs_still_gets_its_callback(settings: Settings) -> None:
    """The gateway is killed before the task ends; the task ends with none alive (its `done`
    waits in the events stream); a gateway started later delivers the callback."""
    env = settings_env(settings) | {"AGENTIX_CALLBACK_ALLOW_PRIVATE": "true"}
    headers = {"Authorization": f"Bearer {mint_token(settings, 'alice')}"}
    first = await GatewayProcess(env, _free_port()).start(timeout_s=60)
    second: GatewayProcess | None = None
    try:
        async with Receiver([]) as rx:
            async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=30) as c:
                resp = await c.post("/api/v1/tasks", json={"dsl": ECHO, "input": {"text": "late"}, "webhook": rx.url})
                assert resp.status_code == 202 and resp.json()["queued"], resp.text
                task_id = resp.json()["id"]
            assert first._proc is not None
            first._proc.send_signal(signal.SIGKILL)
            await first._proc.wait()
            bus = await Bus.connect(settings, name="test")
            try:
                async with dispatcher(settings):  # runs the task to its end: no gateway is alive
                    await eventually(lambda: _ended(bus, task_id), attempts=3000)
            finally:
                await bus.close()
            assert rx.calls == []
            second = await GatewayProcess(env, _free_port()).start(timeout_s=60)
            async with httpx.AsyncClient(base_url=second.url, headers=headers, timeout=30) as c:
                row = await delivered(c, task_id, 1)
                secret = (await c.get("/api/v1/callbacks/secret")).json()["secret"]
            assert len(rx.calls) == 1 and rx.calls[0][0]["webhook-id"] == row["id"]
            assert Webhook(secret).verify(rx.calls[0][1], rx.calls[0][0])["data"]["output"] == {"out": "late"}
    finally:
        await first.stop()
        if second is not None:
            await second.stop()


async def _ended(bus: Bus, task_id: str) -> bool:
    event = await last_event(bus, task_id, "status")
    return isinstance(event, DoneEvent)
