"""SSE endpoints: resume with Last-Event-ID / ?after= without gap or duplicate, live follow,
channel filtering, replay of finished tasks, heartbeat comments, headers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from services.gateway.embedded import EmbeddedGateway
from services.gateway.runs import frames as frames_module
from shared.auth_tokens import mint_token
from shared.bus.events import EventPublisher
from shared.contract.events import DoneEvent, NodeEndEvent, NodeStartEvent, StatusEvent, TokenEvent
from shared.settings import Settings
from tests.support.wait import eventually

DSL: dict[str, Any] = {
    "version": "1",
    "nodes": [
        {"id": "in", "kind": "input"},
        {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
        {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}},
    ],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}
WORDS = [f"w{i} " for i in range(60)]


@dataclass
class Frame:
    id: int | None
    event: str
    data: dict[str, Any]


@pytest.fixture
async def client(gw: EmbeddedGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {mint_token(gw.settings, 'alice')}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=20) as c:
        yield c


async def frames(resp: httpx.Response, comments: list[str] | None = None) -> AsyncIterator[Frame]:
    """A minimal SSE parser (enough for the gateway's frames)."""
    fields: dict[str, str] = {}
    async for line in resp.aiter_lines():
        if line == "":
            if "data" in fields:
                yield Frame(int(fields["id"]) if "id" in fields else None, fields.get("event", "message"),
                            json.loads(fields["data"]))  # fmt: skip
            fields = {}
        elif line.startswith(":"):
            if comments is not None:
                comments.append(line)
        else:
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


async def new_task(client: httpx.AsyncClient) -> str:
    resp = await client.post("/api/v1/tasks", json={"dsl": DSL, "input": {"text": "q"}})
    assert resp.status_code == 202
    return resp.json()["id"]


async def play(gw: EmbeddedGateway, task_id: str, words: list[str] = WORDS, pause_every: int = 0) -> None:
    pub = EventPublisher(gw.app.state.bus, task_id)
    await pub.emit(StatusEvent(task_id=task_id, status="running"))
    await pub.emit(NodeStartEvent(task_id=task_id, node_id="ans", kind="agent"))
    for i, word in enumerate(words):
        await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text=word))
        if pause_every and i % pause_every == 0:
            await pub.flush()
            await asyncio.sleep(0.01)
    await pub.emit(NodeEndEvent(task_id=task_id, node_id="ans", status="done", duration_ms=1.0))
    await pub.emit(StatusEvent(task_id=task_id, status="done"))
    await pub.emit(DoneEvent(task_id=task_id, status="done", output={"out": "".join(words)}))
    await pub.flush()


async def test_resume_with_last_event_id_has_no_gap_and_no_duplicate(
    gw: EmbeddedGateway, client: httpx.AsyncClient
) -> None:
    task_id = await new_task(client)
    producer = asyncio.create_task(play(gw, task_id, pause_every=7))
    seen: list[Frame] = []
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/stream") as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["x-accel-buffering"] == "no"
        async for frame in frames(resp):
            seen.append(frame)
            if sum(f.event == "token" for f in seen) == 17:
                break  # the client drops the connection mid-stream
    resumes = 0
    while seen[-1].event != "done":
        resumes += 1
        headers = {"Last-Event-ID": str(seen[-1].id)}
        async with client.stream("GET", f"/api/v1/tasks/{task_id}/stream", headers=headers) as resp:
            async for frame in frames(resp):
                seen.append(frame)
                if resumes == 1 and sum(f.event == "token" for f in seen) == 40:
                    break
    await producer
    ids = [f.id for f in seen]
    assert all(isinstance(i, int) for i in ids)
    assert ids == sorted(set(ids)), "ids must strictly increase: no duplicate, in order"
    assert "".join(f.data["text"] for f in seen if f.event == "token") == "".join(WORDS)
    assert {f.event for f in seen} == {"status", "token", "done"}
    assert seen[-1].data["output"] == {"out": "".join(WORDS)}
    ns = [f.data["n"] for f in seen]
    assert ns == sorted(ns) and len(ns) == len(set(ns))


async def test_after_query_and_finished_task_replay(gw: EmbeddedGateway, client: httpx.AsyncClient) -> None:
    task_id = await new_task(client)
    await play(gw, task_id, WORDS[:5])
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as resp:
        everything = [f async for f in frames(resp)]  # ends by itself after `done`
    kinds = [f.event for f in everything]
    assert kinds == ["status", "node.start", *["token"] * 5, "node.end", "status", "done"]
    middle = everything[4].id
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events", params={"after": middle}) as resp:
        rest = [f async for f in frames(resp)]
    assert [f.id for f in rest] == [f.id for f in everything[5:]]

    # Wait until the record is terminal: a finished task replays and ends, even from the end.
    for _ in range(200):
        if (await client.get(f"/api/v1/tasks/{task_id}")).json()["status"] == "done":
            break
        await asyncio.sleep(0.02)
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events", params={"after": everything[-1].id}) as resp:
        assert [f async for f in frames(resp)] == []
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/exec") as resp:
        trace = [f.event async for f in frames(resp)]
    assert trace == ["status", "node.start", "node.end", "status", "done"]


async def test_a_named_heartbeat_flows_on_a_quiet_stream_and_is_never_part_of_the_log(
    settings: Settings,
) -> None:
    quick = settings.model_copy(update={"rate_limit_per_min": 100_000, "sse_heartbeat_s": 0.05})
    gw = await EmbeddedGateway(quick).start()
    headers = {"Authorization": f"Bearer {mint_token(quick, 'alice')}"}
    try:
        async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=20) as client:
            task_id = await new_task(client)
            pub = EventPublisher(gw.app.state.bus, task_id)
            await pub.emit(StatusEvent(task_id=task_id, status="running"))
            await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text="quiet "))
            await pub.flush()
            seen: list[Frame] = []
            async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as resp:
                async for f in frames(resp):  # the model is quiet now: only heartbeats flow
                    seen.append(f)
                    if sum(x.event == "heartbeat" for x in seen) == 2:
                        break
            beats = [f for f in seen if f.event == "heartbeat"]
            real = [f for f in seen if f.event != "heartbeat"]
            assert [f.event for f in real] == ["status", "token"] and all(f.id is not None for f in real)
            assert all(f.id is None and f.data["task_id"] == task_id and f.data["ts"] for f in beats)

            # Resuming after the last real event misses nothing and replays no heartbeat.
            await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text="again"))
            await pub.emit(DoneEvent(task_id=task_id, status="done"))
            await pub.flush()
            async with client.stream("GET", f"/api/v1/tasks/{task_id}/events",
                                     headers={"Last-Event-ID": str(real[-1].id)}) as resp:
                after = [f for f in [f async for f in frames(resp)] if f.event != "heartbeat"]
            assert [f.event for f in after] == ["token", "done"]
            # The stored log holds the task's events only.
            async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as resp:
                replay = [f async for f in frames(resp)]
            assert [f.event for f in replay if f.id is not None] == ["status", "token", "token", "done"]
    finally:
        await gw.stop()


async def test_bad_resume_point_and_sse_auth(gw: EmbeddedGateway, client: httpx.AsyncClient) -> None:
    task_id = await new_task(client)
    resp = await client.get(f"/api/v1/tasks/{task_id}/events", headers={"Last-Event-ID": "abc"})
    assert resp.status_code == 400 and resp.headers["content-type"].startswith("application/problem+json")
    async with httpx.AsyncClient(base_url=gw.url) as anonymous:
        assert (await anonymous.get(f"/api/v1/tasks/{task_id}/events")).status_code == 401
    await play(gw, task_id, WORDS[:2])
    token = mint_token(gw.settings, "alice")
    async with httpx.AsyncClient(base_url=gw.url) as browser:  # EventSource cannot send headers
        async with browser.stream("GET", f"/api/v1/tasks/{task_id}/stream", params={"access_token": token}) as r:
            assert r.status_code == 200
            assert [f.event async for f in frames(r)][-1] == "done"


async def test_a_client_that_leaves_while_the_stream_is_backed_up_frees_it(
    gw: EmbeddedGateway, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More frames than the gateway's queue holds, so its reader blocks on a full queue; when the
    client goes, the response and the reader must both end (no task left waiting forever)."""
    monkeypatch.setattr(frames_module, "BATCH", 4)  # a queue of 16 frames
    task_id = await new_task(client)
    pub = EventPublisher(gw.app.state.bus, task_id)
    for i in range(1_500):  # ~24 MB of frames
        await pub.emit(TokenEvent(task_id=task_id, node_id="ans", text=f"{i:05d}" + "x" * 16_000))
    await pub.flush()
    open_streams = gw.app.state.metrics.sse_clients
    nc = gw.app.state.bus.nc
    subscriptions = len(nc._subs)  # the reader's ordered consumer adds one while it lives

    def readers() -> list[asyncio.Task]:
        return [t for t in asyncio.all_tasks() if t.get_name() == f"sse-{task_id}"]

    async with client.stream("GET", f"/api/v1/tasks/{task_id}/stream") as resp:
        assert resp.status_code == 200
        await asyncio.sleep(1.0)  # not reading: socket buffers fill, then the queue
        assert readers() and open_streams._value.get() == 1 and len(nc._subs) == subscriptions + 1
        await resp.aclose()

    async def freed() -> bool:
        return not readers() and open_streams._value.get() == 0 and len(nc._subs) == subscriptions

    await eventually(freed)


async def test_submit_and_stream_is_post_tasks_then_its_events_in_one_request(
    gw: EmbeddedGateway, client: httpx.AsyncClient
) -> None:
    body = {"dsl": DSL, "input": {"text": "q"}}
    key = {"Idempotency-Key": "follow-1"}
    async with client.stream("POST", "/api/v1/tasks/stream", json=body, headers=key) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        task_id = resp.headers["agentix-task-id"]
        assert resp.headers["content-location"] == f"/api/v1/tasks/{task_id}"
        producer = asyncio.create_task(play(gw, task_id, WORDS[:5]))  # the task runs once submitted
        live = [f async for f in frames(resp)]  # ends by itself after `done`
    await producer
    assert [f.event for f in live] == ["status", "node.start", *["token"] * 5, "node.end", "status", "done"]
    async with client.stream("GET", f"/api/v1/tasks/{task_id}/events") as resp:
        assert [f async for f in frames(resp)] == live  # the same events, ids and data as GET …/events
    assert (await client.get(f"/api/v1/tasks/{task_id}")).json()["input"] == {"text": "q"}

    # The same key again: the same task, streamed from its start (it has ended: replayed).
    async with client.stream("POST", "/api/v1/tasks/stream", json=body, headers=key) as resp:
        assert resp.headers["agentix-task-id"] == task_id
        assert [f async for f in frames(resp)] == live
    # Errors are POST /tasks's, as problem+json, before any stream.
    bad = await client.post("/api/v1/tasks/stream", json={"dsl": {"version": "1", "nodes": []}})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")


async def test_submit_and_stream_passes_the_guardrail_first(settings: Settings) -> None:
    blocking = settings.model_copy(update={"rate_limit_per_min": 100_000, "guardrail_blocklist": ["zebra-code"]})
    gw = await EmbeddedGateway(blocking).start()
    headers = {"Authorization": f"Bearer {mint_token(blocking, 'alice')}"}
    try:
        async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=20) as client:
            resp = await client.post("/api/v1/tasks/stream", json={"dsl": DSL, "input": {"text": "say zebra-code"}})
            assert resp.status_code == 400 and resp.headers["content-type"].startswith("application/problem+json")
            assert (await client.get("/api/v1/tasks")).json()["items"] == []  # nothing was submitted
    finally:
        await gw.stop()
