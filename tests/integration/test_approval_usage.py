"""examples/approval.json on the offline model, through the gateway and a dispatcher: while the
task waits for its approval, `GET /tasks/{id}` already shows what the agent node spent (it used to
say 0 prompt + 0 completion tokens until the decision), and the approved task keeps that usage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway.embedded import EmbeddedGateway
from shared.auth_tokens import mint_token
from shared.bus.events import read_events
from shared.contract.events import NodeEndEvent
from tests.support.dispatcher import dispatcher

APPROVAL = json.loads((Path(__file__).resolve().parents[2] / "examples" / "approval.json").read_text())
TIMEOUT_S = 30.0


@pytest.fixture
async def alice(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=10) as c:
        yield c


async def until_status(client: httpx.AsyncClient, task_id: str, status: str) -> dict[str, Any]:
    """The task view once the recorder moved the task to `status` (the recorder is asynchronous)."""
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            body = (await client.get(f"/api/v1/tasks/{task_id}")).json()
            if body["status"] == status:
                return body
            await asyncio.sleep(0.05)


async def draft_usage(gw: EmbeddedGateway, task_id: str) -> dict[str, Any]:
    """The agent node's usage as its `node.end` event reported it."""
    async with asyncio.timeout(TIMEOUT_S):
        async for _, event in read_events(gw.app.state.bus, task_id, follow=True):
            if isinstance(event, NodeEndEvent) and event.node_id == "draft":
                assert event.usage is not None
                return event.usage.model_dump(mode="json", exclude={"cached_calls"})
    raise AssertionError("no node.end for draft")


async def test_a_parked_task_shows_its_usage_and_keeps_it_after_approval(
    gw: EmbeddedGateway, alice: httpx.AsyncClient
) -> None:
    async with dispatcher(gw.settings):  # no chain and no AGENTIX_LLM_*: the offline model answers
        submitted = await alice.post("/api/v1/tasks", json={"dsl": APPROVAL, "input": {"text": "Agentix 1.0"}})
        assert submitted.status_code == 202, submitted.text
        task_id = submitted.json()["id"]
        spent = await draft_usage(gw, task_id)
        assert spent["models"] == ["offline"] and spent["prompt_tokens"] > 0 and spent["completion_tokens"] > 0

        waiting = await until_status(alice, task_id, "waiting")
        assert waiting["usage"] == spent

        approved = await alice.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve"})
        assert approved.status_code == 202, approved.text
        done = await until_status(alice, task_id, "done")
    assert done["usage"] == spent
