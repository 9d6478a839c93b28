"""A high-risk tool call inside an agent's tool loop waits for a person: the task parks
(`waiting`, a chat run `awaiting_approval`) with an `approval.request` that shows the call, and the
decision continues the loop where it stopped — an approved call runs, a rejected one becomes a
tool result saying so — with the calls finished before the pause never made again. Real NATS, the
real dispatcher and gateway, the scripted model server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel

from shared.bus.tools import ToolContext, ToolRegistry
from shared.settings import Settings
from tests.integration.chat_support import (
    ENDED,
    WAIT_S,
    chat_stack,
    events_of,
    new_conversation,
    run_state,
    say,
    thread,
)
from tests.support import openai_server as oai
from tests.support.wait import eventually


class CityArgs(BaseModel):
    city: str


class PathArgs(BaseModel):
    path: str


class CountingTools:
    """A harmless tool and a high-risk one, each counting the calls it really received."""

    def __init__(self) -> None:
        self.calls: dict[str, list[dict[str, Any]]] = {"weather": [], "wipe": []}
        self.registry = ToolRegistry("go")

        @self.registry.tool(name="weather", title="Weather", description="The weather in a city.")
        async def weather(args: CityArgs, ctx: ToolContext) -> dict[str, Any]:
            self.calls["weather"].append(args.model_dump())
            return {"temp": f"3C in {args.city}"}

        @self.registry.tool(name="wipe", title="Wipe", description="Delete a folder.", high_risk=True)
        async def wipe(args: PathArgs, ctx: ToolContext) -> dict[str, Any]:
            self.calls["wipe"].append(args.model_dump())
            return {"deleted": args.path}


def tool_messages(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tool results a model request carried, by call id."""
    return {m["tool_call_id"]: json.loads(m["content"]) for m in request["body"]["messages"] if m["role"] == "tool"}


async def until(check: Callable[[], Awaitable[Any]]) -> Any:
    """`check()`'s first truthy value (the recorder follows the stream: poll its records)."""
    return await eventually(check, attempts=int(WAIT_S / 0.05), every_s=0.05)


async def task_status(client: httpx.AsyncClient, task_id: str, statuses: set[str]) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        body: dict[str, Any] = (await client.get(f"/api/v1/tasks/{task_id}")).json()
        return body if body["status"] in statuses else None

    return await until(check)


async def task_events(client: httpx.AsyncClient, task_id: str) -> list[tuple[str, dict[str, Any]]]:
    """A finished task's events, replayed over SSE."""
    out: list[tuple[str, dict[str, Any]]] = []
    event = ""
    async with asyncio.timeout(WAIT_S), client.stream("GET", f"/api/v1/tasks/{task_id}/events") as resp:
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                out.append((event, json.loads(line.split(":", 1)[1])))
    return out


async def test_a_chat_run_waits_for_the_approval_of_a_high_risk_call_and_goes_on_from_where_it_stopped(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    tools = CountingTools()
    srv.script([
        oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"}, id="c1"),
                              oai.tool_call("wipe", {"path": "/tmp/old"}, id="c2")]),
        oai.reply("Oslo is at 3C and /tmp/old is gone."),
    ])
    async with chat_stack(scripted, tools=tools.registry) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice)
        run_id = (await say(alice, conversation, "Weather in Oslo, then clean /tmp/old"))["run"]["id"]
        await run_state(alice, run_id, {"awaiting_approval"})
        # The harmless call ran before the pause; the high-risk one waits.
        assert tools.calls == {"weather": [{"city": "Oslo"}], "wipe": []}
        task = (await alice.get(f"/api/v1/tasks/{run_id}")).json()
        assert task["status"] == "waiting" and task["usage"]["prompt_tokens"] > 0

        approved = await alice.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})
        assert approved.status_code == 202, approved.text
        frames = await events_of(alice, run_id)
        kinds = [f.event for f in frames]
        [request] = [f.data for f in frames if f.event == "approval.request"]
        assert (request["node_id"], request["call_id"], request["tool"], request["args"]) == (
            "ans", "c2", "wipe", {"path": "/tmp/old"})
        assert "wipe" in request["message"]
        assert kinds.index("approval.request") < kinds.index("approval.decision") < kinds.index("done")
        assert frames[-1].data["status"] == "done"
        assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
        # Each tool was called once: the resume continued the loop, it did not start it again.
        assert tools.calls == {"weather": [{"city": "Oslo"}], "wipe": [{"path": "/tmp/old"}]}
        requests = srv.requests()
        assert len(requests) == 2
        results = tool_messages(requests[1])
        assert results["c1"]["result"] == {"temp": "3C in Oslo"} and results["c2"]["result"] == {"deleted": "/tmp/old"}
        answer = (await thread(alice, conversation))[-1]
        assert answer["content"] == "Oslo is at 3C and /tmp/old is gone."
        steps = {s["call_id"]: s for s in answer["tool_events"]}
        assert steps["c2"]["ok"] and steps["c2"]["input"] == {"path": "/tmp/old"}


async def test_a_rejected_call_is_told_to_the_model_and_the_next_high_risk_call_asks_again(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    """A DSL agent node, through the task approval route: reject, then a second call of the same
    node waits again (a new decision, not a duplicate of the first) and is approved."""
    tools = CountingTools()
    srv.script([
        oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/"}, id="w1")]),
        oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/tmp/cache"}, id="w2")]),
        oai.reply("Only the cache was removed."),
    ])
    dsl = {"version": "1", "nodes": [
        {"id": "in", "kind": "input", "config": {}},
        {"id": "act", "kind": "agent", "config": {"prompt": "{{ in.text }}", "tools": ["wipe"]}},
        {"id": "out", "kind": "output", "config": {"value": "{{ act }}"}},
    ], "edges": [{"source": "in", "target": "act"}, {"source": "act", "target": "out"}]}
    async with chat_stack(scripted, tools=tools.registry) as stack:
        bob = await stack.client()
        created = await bob.post("/api/v1/tasks", json={"dsl": dsl, "input": {"text": "free some disk"}})
        assert created.status_code == 202, created.text
        task_id = created.json()["id"]
        await task_status(bob, task_id, {"waiting"})
        rejected = await bob.post(f"/api/v1/tasks/{task_id}/approval",
                                  json={"decision": "reject", "comment": "not the root"})
        assert rejected.status_code == 202, rejected.text

        async def second_wait() -> bool:
            task = (await bob.get(f"/api/v1/tasks/{task_id}")).json()
            return len(srv.requests()) >= 2 and task["status"] == "waiting"

        await until(second_wait)
        assert tools.calls["wipe"] == []
        refused = tool_messages(srv.requests()[1])["w1"]
        assert refused["ok"] is False and refused["error"]["code"] == "rejected"
        assert "refused" in refused["error"]["message"] and "not the root" in refused["error"]["message"]

        approved = await bob.post(f"/api/v1/tasks/{task_id}/approval", json={"decision": "approve"})
        assert approved.status_code == 202, approved.text
        done = await task_status(bob, task_id, {"done", "failed", "rejected"})
        assert done["status"] == "done" and done["output"] == {"out": "Only the cache was removed."}
        assert tools.calls["wipe"] == [{"path": "/tmp/cache"}]
        requests = [data for event, data in await task_events(bob, task_id) if event == "approval.request"]
        assert [r["call_id"] for r in requests] == ["w1", "w2"]
