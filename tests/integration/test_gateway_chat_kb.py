"""A conversation's knowledge base, end to end on SQLite and PostgreSQL with a real ingestion and
a scripted model server: in `direct` mode a search grounds the answer (its passages go into the
prompt with their titles to cite); in `react` mode the agent is told the knowledge base and to
cite, and its kb_search reaches it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

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
from tests.integration.conftest import scripted_settings
from tests.support import openai_server as oai
from tests.support.nats_server import NatsServer

POLICY = ("Vacation policy. Every employee gets 27 days of paid leave per calendar year. Unused days "
          "carry over until March 31 of the next year.")


@pytest.fixture(params=["sqlite", "postgres"])
def scripted(request: pytest.FixtureRequest, nats_server: NatsServer, tmp_path: Path,
             srv: oai.OpenAIServer) -> Settings:
    settings = scripted_settings(nats_server, tmp_path, srv)
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        settings = settings.model_copy(update={"gateway_db_url": url, "tools_db_url": url})
    return settings


async def handbook(client: httpx.AsyncClient) -> str:
    """A knowledge base with the vacation policy, ingested."""
    kb = await client.post("/api/v1/kb", json={"name": "handbook"})
    assert kb.status_code == 201, kb.text
    job = await client.post(f"/api/v1/kb/{kb.json()['id']}/documents", json={"title": "Vacation", "text": POLICY})
    assert job.status_code == 202, job.text
    async with asyncio.timeout(WAIT_S):
        while (state := (await client.get(f"/api/v1/kb/ingest/{job.json()['job_id']}")).json())["status"] != "done":
            assert state["status"] not in ("failed", "cancelled"), state
            await asyncio.sleep(0.1)
    return "handbook"


def answer_request(srv: oai.OpenAIServer) -> list[dict[str, Any]]:
    return srv.requests()[-1]["body"]["messages"]


async def test_a_direct_conversation_answers_from_its_knowledge_base_with_citations(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    async with chat_stack(scripted, real_tools=True) as stack:
        alice = await stack.client()
        kb = await handbook(alice)
        conversation = await new_conversation(alice, mode="direct", kb=kb)
        srv.script([oai.reply("27 days a year [Vacation].")])
        run_id = (await say(alice, conversation, "How many days of paid leave do I get?"))["run"]["id"]
        events = await events_of(alice, run_id)
        [search] = [f for f in events if f.event == "tool.call"]
        assert (search.data["tool"], search.data["args"]["kb"]) == ("kb_search", "handbook")
        assert search.data["args"]["query"] == "How many days of paid leave do I get?"
        assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
        sent = answer_request(srv)
        assert "cite each source" in sent[0]["content"]
        assert "[Vacation] " in sent[-1]["content"] and "27 days of paid leave" in sent[-1]["content"]
        assert sent[-1]["content"].endswith("Message: How many days of paid leave do I get?")
        answer = (await thread(alice, conversation))[-1]
        assert (answer["content"], answer["message_type"]) == ("27 days a year [Vacation].", "text")

        # Without a knowledge base, no search and no sources.
        plain = await new_conversation(alice, mode="direct")
        run_id = (await say(alice, plain, "Hello?"))["run"]["id"]
        assert not [f for f in await events_of(alice, run_id) if f.event == "tool.call"]
        assert "knowledge base" not in answer_request(srv)[0]["content"]


async def test_a_react_conversation_is_told_its_knowledge_base_and_searches_it(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    async with chat_stack(scripted, real_tools=True) as stack:
        alice = await stack.client()
        kb = await handbook(alice)
        conversation = await new_conversation(alice, kb=kb)  # react
        # The model names no kb: the conversation's is the search's default.
        srv.script([oai.reply(tool_calls=[oai.tool_call("kb_search", {"query": "paid leave"})]),
                    oai.reply("27 days [Vacation].")])
        run_id = (await say(alice, conversation, "How much paid leave?"))["run"]["id"]
        assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
        first = srv.requests()[-2]["body"]
        assert "knowledge base is handbook" in first["messages"][0]["content"]
        assert "cite the sources" in first["messages"][0]["content"]
        [search] = [f["function"] for f in first["tools"] if f["function"]["name"] == "kb_search"]
        assert "kb" not in search["parameters"].get("required", [])
        assert '(default: "handbook")' in search["parameters"]["properties"]["kb"]["description"]
        answer = (await thread(alice, conversation))[-1]
        [step] = answer["tool_events"]
        assert step["name"] == "kb_search" and step["ok"] and "27 days" in json.dumps(step["result"])
        assert step["input"] == {"kb": "handbook", "query": "paid leave"}
        assert answer["content"] == "27 days [Vacation]."
