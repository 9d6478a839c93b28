"""Conversations and chat runs over the real gateway, dispatcher and NATS, on the offline model:
CRUD and ownership, each mode end to end (plan approved and rejected), the memory window, the
tier-1 guardrail on chat messages. SQLite, and PostgreSQL where the database matters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from shared.settings import Settings
from tests.integration.chat_support import (
    ENDED,
    WAIT_S,
    ChatStack,
    chat_stack,
    events_of,
    new_conversation,
    run_state,
    say,
    thread,
)


@pytest.fixture(params=["sqlite", "postgres"])
async def stack(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[ChatStack]:
    if request.param == "postgres":
        settings = settings.model_copy(update={"gateway_db_url": request.getfixturevalue("pg_url")})
    async with chat_stack(settings.model_copy(update={"guardrail_blocklist": ["frobnicate"]})) as running:
        yield running


async def test_conversation_crud_and_another_users_conversation_is_404(stack: ChatStack) -> None:
    alice, bob, admin = await stack.client(), await stack.client(), await stack.client(admin=True)
    first = await new_conversation(alice, title="Trip", mode="direct", model="m1")
    second = await new_conversation(alice)
    got = (await alice.get(f"/api/v1/conversations/{first}")).json()
    assert (got["title"], got["mode"], got["model"], got["pinned"]) == ("Trip", "direct", "m1", False)
    assert (await alice.get(f"/api/v1/conversations/{second}")).json()["mode"] == "react"

    patched = await alice.patch(f"/api/v1/conversations/{first}", json={"title": "Holiday", "pinned": True,
                                                                       "model": ""})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["title"], patched.json()["pinned"], patched.json()["model"]) == ("Holiday", True, None)
    listed = (await alice.get("/api/v1/conversations", params={"limit": 1})).json()
    assert [c["id"] for c in listed["items"]] == [first]  # pinned first
    rest = (await alice.get("/api/v1/conversations", params={"cursor": listed["next_cursor"]})).json()
    assert [c["id"] for c in rest["items"]] == [second] and rest["next_cursor"] is None

    for method, path in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("GET", "/messages"), ("POST", "/messages")):
        body = {"text": "hi"} if method == "POST" else ({"title": "x"} if method == "PATCH" else None)
        resp = await bob.request(method, f"/api/v1/conversations/{first}{path}", json=body)
        assert resp.status_code == 404, (method, path, resp.text)
        assert resp.headers["content-type"].startswith("application/problem+json")
    assert (await bob.get("/api/v1/conversations")).json()["items"] == []
    assert (await admin.get(f"/api/v1/conversations/{first}")).status_code == 200

    assert (await alice.delete(f"/api/v1/conversations/{second}")).status_code == 204
    assert (await alice.get(f"/api/v1/conversations/{second}")).status_code == 404
    bad = await alice.post("/api/v1/conversations", json={"mode": "chatty"})
    assert bad.status_code == 422


async def test_direct_mode_answers_and_the_next_turn_gets_the_history(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice, mode="direct")
    accepted = await say(alice, conversation, "Paris is the capital of France. What is the capital of France?")
    assert accepted["message"]["role"] == "user" and accepted["run"]["position"] == 0
    run_id = accepted["run"]["id"]
    frames = await events_of(alice, run_id)
    assert frames[-1].event == "done" and frames[-1].data["status"] == "done"
    streamed = "".join(f.data["text"] for f in frames if f.event == "token")
    run = await run_state(alice, run_id, ENDED)
    assert (run["state"], run["model"], run["mode"]) == ("succeeded", "offline", "direct")

    messages = await thread(alice, conversation)
    assert [(m["role"], m["message_type"]) for m in messages] == [("user", "text"), ("assistant", "text")]
    answer = messages[1]
    assert answer["run_id"] == run_id and answer["model"] == "offline" and "Paris" in answer["content"]
    assert answer["content"].strip() == streamed.strip()  # the table is the truth the stream promised
    assert answer["usage"]["completion_tokens"] > 0

    second = (await say(alice, conversation, "And of Italy?"))["run"]["id"]
    await run_state(alice, second, ENDED)
    task = (await alice.get(f"/api/v1/tasks/{second}")).json()
    assert task["input"]["history"] == [{"role": "user", "content": messages[0]["content"]},
                                        {"role": "assistant", "content": answer["content"]}]
    newest = (await alice.get(f"/api/v1/conversations/{conversation}/messages",
                              params={"order": "desc", "limit": 1})).json()
    assert newest["items"][0]["run_id"] == second and newest["items"][0]["role"] == "assistant"


async def test_react_mode_runs_the_agent_loop_on_the_offline_model(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice)  # react is the default mode
    run_id = (await say(alice, conversation, "Tools exist. What exists?"))["run"]["id"]
    await events_of(alice, run_id)
    run = await run_state(alice, run_id, ENDED)
    assert (run["state"], run["mode"]) == ("succeeded", "react")
    task = (await alice.get(f"/api/v1/tasks/{run_id}")).json()
    agent = next(n for n in task["dsl"]["nodes"] if n["id"] == "ans")
    assert agent["config"]["tools"] == "auto" and agent["config"]["max_steps"] >= 1
    assert (await thread(alice, conversation))[-1]["message_type"] == "text"


async def test_plan_mode_approved_runs_the_plan(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice, mode="plan")
    run_id = (await say(alice, conversation, "Plans are steps. What is a plan?"))["run"]["id"]
    waiting = await run_state(alice, run_id, {"awaiting_approval", *ENDED})
    assert waiting["state"] == "awaiting_approval"
    task = (await alice.get(f"/api/v1/tasks/{run_id}")).json()
    plan = next(n for n in task["nodes"] if n["id"] == "plan")
    assert plan["status"] == "done" and "steps" in plan["output_preview"]
    approved = await alice.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})
    assert approved.status_code == 202, approved.text
    frames = await events_of(alice, run_id)
    kinds = [f.event for f in frames]
    assert kinds.index("approval.request") < kinds.index("approval.decision") < kinds.index("done")
    run = await run_state(alice, run_id, ENDED)
    assert run["state"] == "succeeded"
    assert [m["role"] for m in await thread(alice, conversation)] == ["user", "assistant"]
    again = await alice.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})
    assert again.status_code == 409


async def test_plan_mode_rejected_ends_the_run_cancelled(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice, mode="direct")
    run_id = (await say(alice, conversation, "What is a plan?", mode="plan"))["run"]["id"]
    await run_state(alice, run_id, {"awaiting_approval"})
    rejected = await alice.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "reject", "comment": "no"})
    assert rejected.status_code == 202, rejected.text
    frames = await events_of(alice, run_id)
    assert frames[-1].data["status"] == "rejected"
    run = await run_state(alice, run_id, ENDED)
    assert (run["state"], run["mode"]) == ("cancelled", "plan")
    messages = await thread(alice, conversation)
    # The plan the user was shown is kept; no `error` message for a refusal.
    assert [(m["role"], m["message_type"]) for m in messages] == [("user", "text"), ("assistant", "interrupted")]
    assert "steps" in messages[1]["content"]


async def test_the_tier1_guardrail_blocks_a_chat_message(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice)
    blocked = await alice.post(f"/api/v1/conversations/{conversation}/messages", json={"text": "please frobnicate"})
    assert blocked.status_code == 400, blocked.text
    assert blocked.json()["errors"][0]["code"] == "guardrail_blocked"
    assert await thread(alice, conversation) == []


async def test_a_queued_run_cancelled_before_its_turn_ends_at_once_and_the_queue_goes_on(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice, mode="direct")
    first = (await say(alice, conversation, "Plans help. What helps?", mode="plan"))["run"]["id"]
    await run_state(alice, first, {"awaiting_approval"})
    held = await say(alice, conversation, "Never mind.")
    assert held["run"]["position"] == 1
    going = (await alice.get(f"/api/v1/conversations/{conversation}/runs")).json()["items"]
    assert [(r["id"], r["state"], r["position"]) for r in going] == [
        (first, "awaiting_approval", 0), (held["run"]["id"], "queued", 1)]
    bob = await stack.client()
    assert (await bob.get(f"/api/v1/conversations/{conversation}/runs")).status_code == 404
    assert (await alice.post(f"/api/v1/runs/{held['run']['id']}/cancel")).status_code == 202
    frames = await events_of(alice, held["run"]["id"])  # its stream ends although it never ran
    assert [f.event for f in frames] == ["queued", "status", "done"] and frames[-1].data["status"] == "cancelled"
    assert (await alice.get(f"/api/v1/runs/{held['run']['id']}")).json()["state"] == "cancelled"
    third = await say(alice, conversation, "Answers help. What helps?")
    assert third["run"]["position"] == 1
    assert (await alice.post(f"/api/v1/runs/{first}/approval", json={"decision": "approve"})).status_code == 202
    assert (await run_state(alice, first, ENDED))["state"] == "succeeded"
    assert (await run_state(alice, third["run"]["id"], ENDED))["state"] == "succeeded"
    assert (await alice.get(f"/api/v1/conversations/{conversation}/runs")).json()["items"] == []
    messages = await thread(alice, conversation)
    assert [(m["role"], m["run_id"]) for m in messages] == [
        ("user", first), ("assistant", first), ("user", held["run"]["id"]),
        ("user", third["run"]["id"]), ("assistant", third["run"]["id"])]


async def test_deleting_a_conversation_stops_its_runs(stack: ChatStack) -> None:
    alice = await stack.client()
    conversation = await new_conversation(alice, mode="direct")
    parked = (await say(alice, conversation, "What is a plan?", mode="plan"))["run"]["id"]
    await run_state(alice, parked, {"awaiting_approval"})
    held = (await say(alice, conversation, "And then?"))["run"]["id"]
    assert (await alice.delete(f"/api/v1/conversations/{conversation}")).status_code == 204
    assert (await alice.get(f"/api/v1/runs/{parked}")).status_code == 404
    async with asyncio.timeout(WAIT_S):
        while True:
            if (await alice.get(f"/api/v1/tasks/{parked}")).json()["status"] == "cancelled":
                break
            await asyncio.sleep(0.05)
    # The run that was waiting its turn never got a task: nothing will ever run it.
    assert (await alice.get(f"/api/v1/tasks/{held}")).status_code == 404
