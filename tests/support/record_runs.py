"""Records real runs' event logs for the translators' golden-frame tests (`tests/data/runs/`).

Each log is what a run stored on the events stream — `(stream sequence, event)` per line, as
JSON — from a real stack: NATS, the tool services, a dispatcher with the offline model and a
gateway, all in this process. The translators' tests read these logs and never the bus.

Run again only to record new logs (the goldens made from them must then be reviewed):
    python -m tests.support.record_runs
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from shared.bus import Bus
from shared.bus.events import read_events
from shared.natsd import NatsServer
from tests.conftest import make_settings
from tests.integration.chat_support import chat_stack, events_of, new_conversation, run_state, say

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def _dump(bus: Bus, run_id: str, name: str) -> None:
    lines = [json.dumps({"seq": seq, "event": event.model_dump(mode="json", exclude_none=True)}, sort_keys=True)
             async for seq, event in read_events(bus, run_id, follow=False)]
    (RUNS / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    print(f"{name}: {len(lines)} events")


async def _approve(client: httpx.AsyncClient, run_id: str) -> None:
    await run_state(client, run_id, {"awaiting_approval"})
    approved = await client.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})
    approved.raise_for_status()


async def _task(client: httpx.AsyncClient, dsl: dict[str, Any], task_input: dict[str, Any]) -> str:
    resp = await client.post("/api/v1/tasks", json={"dsl": dsl, "input": task_input})
    resp.raise_for_status()
    task_id: str = resp.json()["id"]
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as stream:
        async for line in stream.aiter_lines():
            if line == "event: done":
                break
    return task_id


async def record() -> None:
    RUNS.mkdir(parents=True, exist_ok=True)
    server = NatsServer().start()
    try:
        settings = make_settings(server.url, Path(tempfile.mkdtemp(prefix="agentix-record-")) / "data",
                                 token_event_interval_ms=0)
        async with chat_stack(settings, real_tools=True) as stack:
            client = await stack.client("recorder")
            bus = stack.gateways[0].app.state.bus
            # A chat run that calls a tool (the offline model computes with `code_exec`, a high-risk
            # tool: the run waits for its approval), then answers.
            conversation = await new_conversation(client, mode="react")
            run = (await say(client, conversation, "compute 6*7 please"))["run"]["id"]
            await _approve(client, run)
            await events_of(client, run)
            await _dump(bus, run, "chat_tool")
            # A plan run: the plan waits for an approval, is approved, runs and answers.
            conversation = await new_conversation(client, mode="plan")
            run = (await say(client, conversation, "plan a summary of why the sky is blue"))["run"]["id"]
            await _approve(client, run)
            await events_of(client, run)
            await _dump(bus, run, "chat_plan_approved")
            # A chat run that fails: its model does not exist.
            conversation = await new_conversation(client, mode="react")
            run = (await say(client, conversation, "hello", model="no-such-model"))["run"]["id"]
            await events_of(client, run)
            await _dump(bus, run, "chat_failed")
            # A workflow task: a question fans out to two agents in parallel that join.
            dsl = json.loads((EXAMPLES / "branch_fanout.json").read_text())
            task = await _task(client, dsl, {"text": "How do we roll out a new model safely?"})
            await _dump(bus, task, "task_branch_fanout")
    finally:
        server.cleanup()


if __name__ == "__main__":
    asyncio.run(record())
