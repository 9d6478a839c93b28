"""Completion callbacks of chat runs and `/lg` runs over a real gateway, NATS, dispatcher and a
scripted model, to a real HTTP receiver: a chat run's end is POSTed signed (verified with the
real `standardwebhooks` library) and retried after a 500; the real `langgraph_sdk`'s
`runs.create(…, webhook=)` on a thread, a stateless `runs.wait(None, …, webhook=)` and a failed
run deliver the LangGraph run-webhook payload;
an `/lg` run that stops at an approval calls back then (as LangGraph's server does at an
interrupt) and once more after a resume that names a webhook; a loopback target is refused,
naming `webhook`, unless private targets are allowed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langgraph_sdk.errors import UnprocessableEntityError
from standardwebhooks import Webhook

from shared.settings import Settings
from tests.integration.chat_support import chat_stack, new_conversation, say
from tests.integration.test_callbacks import Receiver
from tests.integration.test_langgraph_api import ANSWER, ask, lg
from tests.support import openai_server as oai
from tests.support.wait import eventually


def allowing(settings: Settings) -> Settings:
    """The local receiver is on loopback: private targets allowed, quick retries."""
    return settings.model_copy(update={"callback_allow_private": True, "callback_retry_first_s": 0.2,
                                       "callback_retry_max_s": 1.0})


async def delivered(client: httpx.AsyncClient, run_id: str, count: int = 1) -> list[dict[str, Any]]:
    """The run's deliveries once `count` of them are delivered, oldest end first."""
    async def check() -> list[dict[str, Any]] | None:
        items = (await client.get("/api/v1/callbacks", params={"task_id": run_id})).json()["items"]
        done = [d for d in items if d["status"] == "delivered"]
        return sorted(done, key=lambda d: d["run"]) if len(done) >= count else None

    return await eventually(check, attempts=1500)


def verified(client_secret: str, rx: Receiver, delivery_id: str) -> dict[str, Any]:
    """The body the receiver got for that delivery, its signature checked by the library."""
    calls = [(h, b) for h, b, status in rx.calls if h["webhook-id"] == delivery_id and status == 200]
    assert len(calls) == 1, [h["webhook-id"] for h, _, _ in rx.calls]
    headers, body = calls[0]
    sent: dict[str, Any] = Webhook(client_secret).verify(body, headers)
    with pytest.raises(Exception):  # noqa: B017  (the library's own error type): a changed body fails
        Webhook(client_secret).verify(body + b" ", headers)
    return sent


async def test_a_chat_run_with_a_webhook_posts_its_end_signed(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER)])
    async with Receiver([500]) as rx, chat_stack(allowing(scripted)) as stack:
        client = await stack.client("cb-chat")
        conversation = await new_conversation(client, mode="direct")
        run_id = (await say(client, conversation, "Capital of Norway?", webhook=rx.url))["run"]["id"]
        (row,) = await delivered(client, run_id)
        assert row["kind"] == "chat" and row["attempts"] == 2 and row["run"] == 0  # a 500, then delivered
        secret = (await client.get("/api/v1/callbacks/secret")).json()["secret"]
        sent = verified(secret, rx, row["id"])
        assert sent["type"] == "run.succeeded"
        data = sent["data"]
        assert data["id"] == run_id and data["conversation_id"] == conversation and data["state"] == "succeeded"
        assert [(m["role"], m["content"]) for m in data["messages"]] == [("user", "Capital of Norway?"),
                                                                          ("assistant", ANSWER)]
        # The task callbacks' consumer leaves a chat run's delivery alone: one delivery, one call per attempt.
        assert len((await client.get(f"/api/v1/tasks/{run_id}/deliveries")).json()["items"]) == 1
        assert len(rx.calls) == 2


async def test_lg_runs_deliver_the_langgraph_run_webhook_payload(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER), oai.reply("Bergen is on the west coast."), oai.auth_failure(), oai.auth_failure()])
    async with Receiver([]) as rx, chat_stack(allowing(scripted)) as stack:
        client = lg(stack, "cb-lg")
        native = await stack.client("cb-lg")
        secret = (await native.get("/api/v1/callbacks/secret")).json()["secret"]
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, "chat-direct", input=ask("Capital of Norway?"), webhook=rx.url)
        await client.runs.join(thread, run["run_id"])
        (row,) = await delivered(native, run["run_id"])
        assert row["kind"] == "lg"
        sent = verified(secret, rx, row["id"])
        assert sent["run_id"] == run["run_id"] and sent["thread_id"] == thread
        assert sent["assistant_id"] == "chat-direct" and sent["status"] == "success"
        assert sent["kwargs"] == {"webhook": rx.url} and "error" not in sent
        assert sent["run_started_at"] and sent["run_ended_at"] and sent["webhook_sent_at"]
        assert [(m["type"], m["content"]) for m in sent["values"]["messages"]] == [("human", "Capital of Norway?"),
                                                                                   ("ai", ANSWER)]

        values = await client.runs.wait(None, "chat-direct", input=ask("And Bergen?"), webhook=rx.url)
        assert values["messages"][-1]["content"] == "Bergen is on the west coast."
        stateless = [d for d in (await native.get("/api/v1/callbacks")).json()["items"] if d["id"] != row["id"]]
        assert len(stateless) == 1
        (other,) = await delivered(native, stateless[0]["task_id"])
        sent = verified(secret, rx, other["id"])
        assert sent["status"] == "success" and sent["run_id"] == other["task_id"]
        assert sent["values"]["messages"][-1] == values["messages"][-1]

        failing = await client.runs.create(thread, "chat-direct", input=ask("And again?"), webhook=rx.url)
        error = (await client.runs.join(thread, failing["run_id"]))["__error__"]
        (failed,) = await delivered(native, failing["run_id"])
        sent = verified(secret, rx, failed["id"])
        assert sent["status"] == "error" and sent["error"] == error  # as `runs.wait`'s `__error__`
        assert sent["error"] == {"error": "auth", "message": "The model provider refused the API key."}
        assert sent["values"]["messages"][-1]["content"] == error["message"]  # the failure, said in the thread


async def test_an_lg_run_calls_back_at_its_approval_and_after_a_resume_with_a_webhook(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply('{"steps": ["recall the capital"]}'), oai.reply(ANSWER)])
    async with Receiver([]) as rx, chat_stack(allowing(scripted)) as stack:
        client = lg(stack, "cb-plan")
        native = await stack.client("cb-plan")
        secret = (await native.get("/api/v1/callbacks/secret")).json()["secret"]
        thread = (await client.threads.create())["thread_id"]
        waited = await client.runs.wait(thread, "chat-plan", input=ask("Capital of Norway?"), webhook=rx.url)
        assert waited["__interrupt__"]
        run_id = (await client.runs.list(thread))[0]["run_id"]
        (first,) = await delivered(native, run_id)
        at_interrupt = verified(secret, rx, first["id"])
        # LangGraph's server calls a run's webhook when the run returns at an interrupt: `success`.
        assert at_interrupt["status"] == "success" and at_interrupt["run_id"] == run_id
        assert [m["type"] for m in at_interrupt["values"]["messages"]] == ["human"]

        resumed = await client.runs.wait(thread, "chat-plan", command={"resume": "approve"}, webhook=rx.url)
        assert resumed["messages"][-1]["content"] == ANSWER
        first_again, second = await delivered(native, run_id, 2)
        assert first_again["id"] == first["id"] and second["run"] == 1
        after = verified(secret, rx, second["id"])
        assert after["status"] == "success" and after["values"]["messages"][-1]["content"] == ANSWER
        assert len(rx.calls) == 2


async def test_a_loopback_target_is_refused_naming_webhook_unless_allowed(settings: Settings) -> None:
    target = "http://127.0.0.1:9/cb"
    async with chat_stack(settings, with_dispatcher=False) as stack:
        native = await stack.client("cb-refused")
        conversation = await new_conversation(native, mode="direct")
        sent = await native.post(f"/api/v1/conversations/{conversation}/messages",
                                 json={"text": "hi", "webhook": target})
        assert sent.status_code == 422 and "webhook" in sent.json()["detail"], sent.text
        assert "private or loopback" in sent.json()["detail"]
        assert (await native.get(f"/api/v1/conversations/{conversation}/messages")).json()["items"] == []
        client = lg(stack, "cb-refused")
        thread = (await client.threads.create())["thread_id"]
        for attempt in (lambda: client.runs.create(thread, "chat-direct", input=ask("hi"), webhook=target),
                        lambda: client.runs.wait(None, "chat-direct", input=ask("hi"), webhook=target)):
            with pytest.raises((UnprocessableEntityError, httpx.HTTPStatusError)) as refused:
                await attempt()  # `runs.wait` raises httpx's own error for a 422
            error: Any = refused.value
            body: Any = error.body if isinstance(error, UnprocessableEntityError) else error.response.json()
            assert body["status"] == 422 and body["errors"][0]["field"] == "webhook", json.dumps(body)
        with pytest.raises(UnprocessableEntityError) as batch:
            await client.runs.create_batch([{"assistant_id": "chat-direct", "input": ask("a")},
                                            {"assistant_id": "chat-direct", "input": ask("b"), "webhook": target}])
        assert batch.value.body["errors"][0]["field"] == "[1].webhook"  # type: ignore[index]
        assert await client.runs.list(thread) == []
        assert (await native.get("/api/v1/callbacks")).json()["items"] == []
    async with chat_stack(allowing(settings), with_dispatcher=False) as stack:
        client = lg(stack, "cb-allowed")
        thread = (await client.threads.create())["thread_id"]
        made = await client.runs.create(thread, "chat-direct", input=ask("hi"), webhook=target)
        assert made["status"] == "pending"  # no dispatcher: it never ends
        native = await stack.client("cb-allowed")
        (owed,) = (await native.get("/api/v1/callbacks")).json()["items"]
        assert (owed["task_id"], owed["kind"], owed["status"]) == (made["run_id"], "lg", "waiting")
        await client.threads.delete(thread)  # the run goes before it ends: its callback fails, saying why
        gone = (await native.get(f"/api/v1/callbacks/{owed['id']}")).json()
        assert gone["status"] == "failed" and "conversation was deleted" in gone["last_error"]
