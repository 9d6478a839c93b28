"""Every way a chat run fails, end to end through the chat API with a scripted model server, on
SQLite and PostgreSQL: each failure class ends in an `error` assistant message with its plain
sentence and an `error` event on the run's stream (before `done`); a client that drops its stream
does not stop the run; a cancel mid-stream keeps the partial with the tool steps so far; another
user's run is 404."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from shared.bus.tools import ToolContext, ToolRegistry
from shared.settings import Settings
from tests.conftest import make_settings
from tests.integration.chat_support import (
    ENDED,
    WAIT_S,
    chat_stack,
    events_of,
    frames,
    new_conversation,
    run_state,
    say,
    thread,
)
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer

BUDGET = 3000  # tokens per run: a short turn fits, a long one does not


@pytest.fixture(params=["sqlite", "postgres"])
def scripted(request: pytest.FixtureRequest, nats_server: NatsServer, tmp_path: Path,
             srv: oai.OpenAIServer) -> Settings:
    """One attempt per call, and breakers that never open here (every failure is on purpose)."""
    settings = make_settings(nats_server.url, tmp_path / "data", llm_base_url=srv.url, llm_model="m",
                             llm_api_key="k", llm_retry_attempts=1, breaker_failure_threshold=1000,
                             default_token_budget=BUDGET)
    if request.param == "postgres":
        settings = settings.model_copy(update={"gateway_db_url": request.getfixturevalue("fresh_pg")})
    return settings


async def fails_with(client: httpx.AsyncClient, conversation: str, sentence: str, code: str, text: str = "Hello?",
                     **extra: Any) -> str:
    """The run fails with `code`, and its `error` event and message say the sentence (which
    begins with `sentence` when that ends in a space); returns the sentence."""
    run_id = (await say(client, conversation, text, **extra))["run"]["id"]
    events = await events_of(client, run_id)
    [error] = [f for f in events if f.event == "error"]
    assert events[-1].event == "done" and events.index(error) == len(events) - 2  # right before `done`
    said_live = error.data["message"]
    assert error.data["code"] == code and said_live.startswith(sentence), error.data
    assert said_live == sentence or sentence.endswith(" ")
    assert (await run_state(client, run_id, ENDED))["state"] in ("failed", "budget_exceeded")
    said = [m for m in await thread(client, conversation) if m["run_id"] == run_id]
    assert [(m["role"], m["message_type"], m["content"]) for m in said] == [
        ("user", "text", text), ("assistant", "error", said_live)]
    return str(said_live)


async def test_each_failure_class_says_why_in_an_error_message_and_event(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    async with chat_stack(scripted, with_dispatcher=False) as stack:
        admin = await stack.client("root", admin=True)
        # The chain's model, with a timeout that a hanging request reaches (the others are answered at once).
        main = {"name": "main", "provider": "openai", "base_url": srv.url, "model": "m", "api_key": "k",
                "params": {"timeout_s": 5}}
        assert (await admin.post("/api/v1/admin/models", json=main)).status_code == 201
        assert (await admin.put("/api/v1/admin/models/chain", json={"active": "main"})).status_code == 200
        async with dispatcher(scripted):  # started now, it reads the chain from the control bucket
            alice = await stack.client("alice")
            conversation = await new_conversation(alice, mode="direct")

            # The wait is read from the provider's words (OpenAI says it in the message too).
            srv.script([oai.rate_limited(retry_after=7, message="Rate limit reached for m. Please try again in 7s.")])
            await fails_with(alice, conversation, "The model is rate limited — retry in 7 s.", "rate_limited")
            srv.script([oai.rate_limited(retry_after=7)])  # only the Retry-After header says it
            await fails_with(alice, conversation, "The model is rate limited — retry in 7 s.", "rate_limited")
            srv.script([oai.auth_failure()])
            await fails_with(alice, conversation, "The model provider refused the API key.", "auth")
            srv.script([oai.model_not_found("m")])
            said = await fails_with(alice, conversation, "Unknown model id. ", "model_not_found")
            assert "does not exist" in said
            srv.script([oai.hang()])
            await fails_with(alice, conversation, "The model timed out.", "timeout")

            # The conversation goes on after its failures; the error sentences were never sent back.
            run_id = (await say(alice, conversation, "Still there?"))["run"]["id"]
            assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
            sent = srv.requests()[-1]["body"]["messages"]
            assert not any("refused the API key" in m["content"] for m in sent)
            assert (await thread(alice, conversation))[-1]["content"] == "echo: Still there?"
            # Last: this long message stays in the conversation's memory, over budget for every later turn.
            await fails_with(alice, conversation, "The token budget of this answer is exhausted.", "budget_exceeded",
                             text="Please read all of this. " * 800)

            bob = await stack.client("bob")
            for method, path in (("GET", ""), ("GET", "/events"), ("POST", "/cancel"), ("POST", "/approval")):
                body = {"decision": "approve"} if path == "/approval" else None
                resp = await bob.request(method, f"/api/v1/runs/{run_id}{path}", json=body)
                assert resp.status_code == 404, (method, path, resp.text)
                assert resp.headers["content-type"].startswith("application/problem+json")


PARTIAL = "A long answer that the user will not wait to see the end of"


class CityArgs(BaseModel):
    city: str


def weather_tools(gate: asyncio.Event | None = None) -> ToolRegistry:
    """`weather`; with a `gate`, it answers only once the gate is open."""
    registry = ToolRegistry("go")

    @registry.tool(name="weather", title="Weather", description="The weather in a city.")
    async def weather(args: CityArgs, ctx: ToolContext) -> dict[str, Any]:
        if gate is not None:
            await gate.wait()
        return {"temp": f"3C in {args.city}"}

    return registry


async def test_a_client_that_drops_its_stream_does_not_stop_the_run(scripted: Settings, srv: oai.OpenAIServer) -> None:
    gate = asyncio.Event()
    srv.script([oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"})]), oai.reply("It is 3C in Oslo.")])
    async with chat_stack(scripted, tools=weather_tools(gate)) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice)  # react
        run_id = (await say(alice, conversation, "Weather in Oslo?"))["run"]["id"]
        async with asyncio.timeout(WAIT_S):
            seen = [f.event async for f in frames(alice, run_id, until="tool.call")]
        assert seen[-1] == "tool.call"  # the client left mid-run: the tool is still waiting
        assert (await alice.get(f"/api/v1/runs/{run_id}")).json()["state"] not in ENDED
        gate.set()
        assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
        answer = (await thread(alice, conversation))[-1]
        assert (answer["role"], answer["message_type"], answer["content"]) == ("assistant", "text", "It is 3C in Oslo.")
        assert answer["tool_events"][0]["ok"] is True


async def test_a_cancel_mid_stream_keeps_the_partial_with_the_tool_steps_so_far(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"})]), oai.hang(PARTIAL, seconds=600)])
    async with chat_stack(scripted, tools=weather_tools()) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice)  # react
        run_id = (await say(alice, conversation, "Weather in Oslo, at length?"))["run"]["id"]
        shown: list[str] = []
        async with asyncio.timeout(WAIT_S):
            async for frame in frames(alice, run_id):
                if frame.event == "token":
                    if not shown:
                        assert (await alice.post(f"/api/v1/runs/{run_id}/cancel")).status_code == 202
                    shown.append(frame.data["text"])
        assert (await run_state(alice, run_id, ENDED))["state"] == "cancelled"
        said = await thread(alice, conversation)
        assert [(m["role"], m["message_type"]) for m in said] == [("user", "text"), ("assistant", "interrupted")]
        assert said[1]["content"] == "".join(shown) and PARTIAL.startswith(said[1]["content"])
        [step] = said[1]["tool_events"]
        assert (step["name"], step["input"], step["ok"]) == ("weather", {"city": "Oslo"}, True)
        assert step["result"] == {"temp": "3C in Oslo"}
