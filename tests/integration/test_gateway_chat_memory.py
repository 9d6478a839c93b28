"""A long conversation's memory through the chat API, on SQLite and PostgreSQL, with a scripted
model server: past 24 messages the older turns are folded into a running summary by the model,
once per window (the summary requests are counted at the server), incrementally (the old summary
and only the messages that newly left the window), and a failed fold never fails the turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway.chat.memory import SUMMARY_SYSTEM
from shared.settings import Settings
from tests.integration.chat_support import ENDED, WAIT_S, chat_stack, new_conversation, run_state, say, thread
from tests.integration.conftest import scripted_settings
from tests.support import openai_server as oai
from tests.support.nats_server import NatsServer


@pytest.fixture(params=["sqlite", "postgres"])
def scripted(request: pytest.FixtureRequest, nats_server: NatsServer, tmp_path: Path,
             srv: oai.OpenAIServer) -> Settings:
    settings = scripted_settings(nats_server, tmp_path, srv)
    if request.param == "postgres":
        settings = settings.model_copy(update={"gateway_db_url": request.getfixturevalue("pg_url")})
    return settings


def is_summary(request: dict[str, Any]) -> bool:
    first = request["body"]["messages"][0]
    return first["role"] == "system" and first["content"] == SUMMARY_SYSTEM


def summary_requests(srv: oai.OpenAIServer) -> list[dict[str, Any]]:
    return [r for r in srv.requests() if is_summary(r)]


def last_answer_request(srv: oai.OpenAIServer) -> list[dict[str, Any]]:
    return [r for r in srv.requests() if not is_summary(r)][-1]["body"]["messages"]


async def turns(client: httpx.AsyncClient, conversation: str, first: int, count: int) -> None:
    """Messages `first`… posted at once (they run one after the other); back when all ended."""
    posted = [await say(client, conversation, f"Turn {n}: remember the number {n * 7}.")
              for n in range(first, first + count)]
    async with asyncio.timeout(WAIT_S):
        for accepted in posted:
            assert (await run_state(client, accepted["run"]["id"], ENDED))["state"] == "succeeded"


async def test_a_long_conversation_folds_its_older_turns_into_a_running_summary(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    async with chat_stack(scripted) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice, mode="direct")
        await turns(alice, conversation, 1, 12)  # 24 messages: every one still verbatim
        assert summary_requests(srv) == []
        sent = last_answer_request(srv)
        assert [m["role"] for m in sent[1:]] == ["user", "assistant"] * 11 + ["user"]

        # Message 25: a fold is due; the summary request fails, the turn does not.
        srv.script([oai.server_error()])
        await turns(alice, conversation, 13, 1)
        assert len(summary_requests(srv)) == 1
        sent = last_answer_request(srv)
        assert len(sent) == 1 + 24 + 1 and "Turn 1:" in sent[1]["content"]  # the answer went on unfolded
        assert (await alice.get(f"/api/v1/conversations/{conversation}")).json()["summary"] is None
        assert [m["message_type"] for m in await thread(alice, conversation)][-1] == "text"

        # The next turn folds again: 26 unsummarised messages, the oldest 10 leave the window.
        srv.script([oai.reply("SUMMARY-ONE: numbers 7 to 35.")])
        await turns(alice, conversation, 14, 1)
        [fold] = summary_requests(srv)[1:]
        prompt = fold["body"]["messages"][-1]["content"]
        assert "(none yet)" in prompt and "Turn 1:" in prompt and "Turn 5:" in prompt and "Turn 6:" not in prompt
        sent = last_answer_request(srv)
        assert sent[1] == {"role": "system",
                           "content": "Summary of the earlier conversation:\nSUMMARY-ONE: numbers 7 to 35."}
        assert "Turn 6:" in sent[2]["content"] and len(sent) == 1 + 1 + 16 + 1
        stored = (await alice.get(f"/api/v1/conversations/{conversation}")).json()
        assert (stored["summary"], stored["summarized"]) == ("SUMMARY-ONE: numbers 7 to 35.", 10)
        # The summary's tokens are not the answer: the assistant message is the answer alone.
        assert (await thread(alice, conversation))[-1]["content"].startswith("echo: Turn 14:")

        # The window slides without asking for a summary until it passes 24 again.
        await turns(alice, conversation, 15, 3)
        assert len(summary_requests(srv)) == 2
        sent = last_answer_request(srv)
        assert "SUMMARY-ONE" in sent[1]["content"] and len(sent) == 1 + 1 + 22 + 1

        srv.script([oai.reply("SUMMARY-TWO")])
        await turns(alice, conversation, 18, 1)
        [fold] = summary_requests(srv)[2:]
        prompt = fold["body"]["messages"][-1]["content"]
        # Incremental: the old summary and the messages that newly left the window, nothing older.
        assert "SUMMARY-ONE: numbers 7 to 35." in prompt and "Turn 6:" in prompt and "Turn 9:" in prompt
        assert "Turn 5:" not in prompt and "Turn 10:" not in prompt
        stored = (await alice.get(f"/api/v1/conversations/{conversation}")).json()
        assert (stored["summary"], stored["summarized"]) == ("SUMMARY-TWO", 18)
        assert last_answer_request(srv)[1]["content"].endswith("SUMMARY-TWO")
