"""The LangGraph Agent Server API at `/lg`, driven by the real `langgraph-sdk` against a real
gateway (uvicorn) + dispatcher: threads, every stream mode, a dropped stream the SDK rejoins by
itself, the multitask strategies, a plan approval and a high-risk tool call as interrupts resumed
with a command, join, a failed run, cancel, and stateless runs. A scripted model server streams
slowly where a run must be caught mid-answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.chat_support import WAIT_S, ChatStack, chat_stack
from tests.integration.test_tool_approval import CountingTools, tool_messages
from tests.support import openai_server as oai
from tests.support.wait import eventually

ANSWER = "Oslo is the capital of Norway and its largest city by far."
HALF = "The first half of an answer that never"


def lg(stack: ChatStack, user: str = "lg-user") -> LangGraphClient:
    """The SDK as a user would set it up: the gateway's URL + `/lg`, the API token as its key."""
    return get_client(url=stack.gateways[0].url + "/lg", api_key=mint_token(stack.settings, user))


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def collect(parts: AsyncIterator[Any]) -> list[Any]:
    async with asyncio.timeout(WAIT_S):
        return [p async for p in parts]


async def test_threads_assistants_and_a_run_in_every_stream_mode(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER, chunk_chars=5)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        found = await client.assistants.search(graph_id="chat", response_format="object", limit=2)
        assert [a["assistant_id"] for a in found["assistants"]] == ["chat-direct", "chat-react"]
        assert found["next"] == "2"
        assert (await client.assistants.get("chat-plan"))["graph_id"] == "chat"
        thread = await client.threads.create(thread_id="t-modes-1")
        assert thread["thread_id"] == "t-modes-1" and thread["status"] == "idle"
        with pytest.raises(ConflictError):
            await client.threads.create(thread_id="t-modes-1")
        assert (await client.threads.create(thread_id="t-modes-1", if_exists="do_nothing"))["thread_id"] == "t-modes-1"
        created: list[Any] = []
        parts = await collect(client.runs.stream(
            "t-modes-1", "chat-direct", input=ask("What is the capital of Norway?"),
            stream_mode=["values", "updates", "messages-tuple", "custom"], on_run_created=created.append))
        events = [p.event for p in parts]
        assert events[0] == "metadata" and events[-1] == "end", events
        run_id = parts[0].data["run_id"]
        assert parts[0].data["attempt"] == 1 and created[0]["run_id"] == run_id
        assert created[0]["thread_id"] == "t-modes-1"
        tokens = [p.data for p in parts if p.event == "messages"]
        assert "".join(chunk["content"] for chunk, _ in tokens) == ANSWER
        assert all(meta["langgraph_node"] == "ans" and meta["run_id"] == run_id for _, meta in tokens)
        assert {"ans"} <= {node for p in parts if p.event == "updates" for node in p.data}
        values = [p.data for p in parts if p.event == "values"]
        assert [m["type"] for m in values[0]["messages"]] == ["human"]
        assert [(m["type"], m["content"]) for m in values[-1]["messages"]][-1] == ("ai", ANSWER)
        ids = [p.id for p in parts if p.event != "end"]  # `end` has no id of its own (the SDK repeats the last)
        assert None not in ids
        assert len(ids) == len(set(ids))

        # Joining after any frame replays exactly what followed it, the same frames with the same ids.
        cut = len(parts) // 2
        rest = await collect(client.runs.join_stream("t-modes-1", run_id, last_event_id=parts[cut].id,
                                                     stream_mode=["values", "updates", "messages-tuple", "custom"]))
        assert [(p.event, p.id, p.data) for p in rest[:-1]] == [(p.event, p.id, p.data) for p in parts[cut + 1:-1]]
        assert rest[-1].event == "end"

        run = await client.runs.get("t-modes-1", run_id)
        assert run["status"] == "success" and run["assistant_id"] == "chat-direct"
        state = await client.threads.get_state("t-modes-1")
        assert [(m["type"], m["content"]) for m in state["values"]["messages"]] == [
            ("human", "What is the capital of Norway?"), ("ai", ANSWER)]
        listed = await client.threads.search(status="idle")
        assert [t["thread_id"] for t in listed] == ["t-modes-1"]
        await client.threads.delete("t-modes-1")
        with pytest.raises(NotFoundError):
            await client.threads.get("t-modes-1")


class DropOnce(httpx.AsyncBaseTransport):
    """A transport that breaks the first run stream's connection after its first token frame,
    as a proxy timeout or a network blip would; every other request goes through untouched."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.dropped = False
        self.requests: list[tuple[str, str, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path, request.headers.get("last-event-id")))
        response = await self.inner.handle_async_request(request)
        if self.dropped or not request.url.path.endswith("/runs/stream") or request.method != "POST":
            return response
        self.dropped = True
        upstream = response.stream
        assert isinstance(upstream, httpx.AsyncByteStream)

        class Breaking(httpx.AsyncByteStream):
            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in upstream:
                    yield chunk
                    if b"event: messages" in chunk:
                        raise httpx.RemoteProtocolError("peer closed connection mid-stream")

            async def aclose(self) -> None:
                await upstream.aclose()

        return httpx.Response(response.status_code, headers=response.headers, stream=Breaking(),
                              extensions=response.extensions)


async def test_a_dropped_stream_is_rejoined_by_the_sdk_with_no_gap_or_duplicate(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply(ANSWER, chunk_chars=3, delay_s=0.05)])
    async with chat_stack(scripted) as stack:
        transport = DropOnce()
        token = mint_token(stack.settings, "lg-drop")
        client = LangGraphClient(httpx.AsyncClient(base_url=stack.gateways[0].url + "/lg", transport=transport,
                                                   headers={"Authorization": f"Bearer {token}"}, timeout=60))
        await client.threads.create(thread_id="t-drop")
        parts = await collect(client.runs.stream("t-drop", "chat-direct", input=ask("Capital of Norway?"),
                                                 stream_mode=["messages-tuple", "values"]))
        assert transport.dropped
        rejoins = [r for r in transport.requests if r[0] == "GET" and r[1].endswith("/stream")]
        assert rejoins and rejoins[0][2], transport.requests  # it came back with a Last-Event-ID
        assert "".join(p.data[0]["content"] for p in parts if p.event == "messages") == ANSWER
        assert [p.event for p in parts][-1] == "end"
        ids = [p.id for p in parts if p.event != "end"]
        assert len(ids) == len(set(ids))
        assert parts[-2].event == "values" and parts[-2].data["messages"][-1]["content"] == ANSWER


async def until_streaming(client: LangGraphClient, thread_id: str, run_id: str) -> None:
    """Returns once the run has streamed text (joining from its start)."""
    async with asyncio.timeout(WAIT_S):
        async for part in client.runs.join_stream(thread_id, run_id, stream_mode="messages-tuple"):
            if part.event == "messages":
                return


async def messages_of(client: LangGraphClient, thread_id: str) -> list[tuple[str, str]]:
    state = await client.threads.get_state(thread_id)
    return [(m["type"], m["content"]) for m in state["values"]["messages"]]


async def test_multitask_strategies_map_onto_the_conversation_queue(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.hang(HALF, seconds=600), oai.reply("C answers."), oai.hang(HALF, seconds=600),
                oai.reply("E answers.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-multi")
        first = await client.runs.create("t-multi", "chat-direct", input=ask("A asks"))
        assert first["status"] in ("pending", "running")
        await until_streaming(client, "t-multi", first["run_id"])
        assert (await client.threads.get("t-multi"))["status"] == "busy"
        with pytest.raises(ConflictError):
            await client.runs.create("t-multi", "chat-direct", input=ask("R asks"), multitask_strategy="reject")
        held = await client.runs.create("t-multi", "chat-direct", input=ask("B asks"), multitask_strategy="enqueue")
        assert held["status"] == "pending"
        third = await client.runs.wait("t-multi", "chat-direct", input=ask("C asks"), multitask_strategy="interrupt")
        assert third["messages"][-1]["content"] == "C answers."
        assert (await client.runs.get("t-multi", first["run_id"]))["status"] == "interrupted"
        held_view = await client.runs.get("t-multi", held["run_id"])
        assert (held_view["status"], held_view["multitask_strategy"]) == ("interrupted", "enqueue")

        fourth = await client.runs.create("t-multi", "chat-direct", input=ask("D asks"))
        await until_streaming(client, "t-multi", fourth["run_id"])
        fifth = await client.runs.wait("t-multi", "chat-direct", input=ask("E asks"), multitask_strategy="rollback")
        assert fifth["messages"][-1]["content"] == "E answers."
        strategies = [run["multitask_strategy"] for run in await client.runs.list("t-multi", limit=10)]
        assert strategies == ["rollback", "enqueue", "interrupt", "enqueue", "enqueue"], strategies  # newest first
        said = await messages_of(client, "t-multi")
        assert ("human", "D asks") not in said  # rolled back: the interrupted run's messages are gone
        assert said[:2] == [("human", "A asks"), ("ai", said[1][1])] and HALF.startswith(said[1][1].strip())
        assert said[-4:] == [("human", "C asks"), ("ai", "C answers."), ("human", "E asks"), ("ai", "E answers.")]
        assert (await client.threads.get("t-multi"))["status"] == "idle"


async def test_a_plan_approval_is_an_interrupt_resumed_with_a_command(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply('{"steps": ["recall the capital"]}'), oai.reply(ANSWER)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        thread = (await client.threads.create())["thread_id"]
        parts = await collect(client.runs.stream(thread, "chat-plan", input=ask("Capital of Norway?"),
                                                 stream_mode=["values", "updates"]))
        assert parts[-1].event == "end"
        run_id = parts[0].data["run_id"]
        interrupt = parts[-2].data["__interrupt__"][0]
        assert parts[-2].event == "values" and interrupt["id"] and "recall the capital" in interrupt["value"]["message"]
        assert any(p.event == "updates" and "__interrupt__" in p.data for p in parts)
        seen = await client.threads.get(thread)
        assert seen["status"] == "interrupted" and seen["interrupts"][run_id][0]["id"] == interrupt["id"]
        assert (await client.runs.get(thread, run_id))["status"] == "interrupted"
        assert (await client.threads.get_state(thread))["interrupts"][0]["id"] == interrupt["id"]
        assert interrupt["value"]["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
        with pytest.raises(UnprocessableEntityError) as no_edit:  # a plan approval has no call to edit
            await client.runs.create(thread, "chat-plan", command={"resume": {"decisions": [
                {"type": "edit", "edited_action": {"name": "approve", "args": {"x": 1}}}]}})
        assert no_edit.value.body["errors"][0]["message"] == "edit"  # type: ignore[index]

        resumed = await collect(client.runs.stream(thread, "chat-plan", command={"resume": "approve"},
                                                   stream_mode=["messages-tuple", "custom"]))
        assert resumed[0].event == "metadata" and resumed[0].data["run_id"] == run_id
        assert any(p.event == "custom" and p.data["type"] == "approval.decision" for p in resumed)
        assert "".join(p.data[0]["content"] for p in resumed if p.event == "messages"
                       and p.data[1]["langgraph_node"] == "ans") == ANSWER
        assert resumed[-1].event == "end"
        assert (await client.runs.get(thread, run_id))["status"] == "success"
        assert (await messages_of(client, thread))[-1] == ("ai", ANSWER)


async def test_a_high_risk_tool_call_is_an_interrupt_approved_or_rejected_with_a_command(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    tools = CountingTools()
    srv.script([oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/tmp/old"}, id="c1")]),
                oai.reply("/tmp/old is gone."),
                oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/"}, id="c2")]),
                oai.reply("I left / alone."),
                oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/srv"}, id="c3")])])
    async with chat_stack(scripted, tools=tools.registry) as stack:
        client = lg(stack)
        thread = (await client.threads.create())["thread_id"]
        parts = await collect(client.runs.stream(thread, "chat-react", input=ask("Clean /tmp/old"),
                                                 stream_mode=["values", "updates"]))
        assert [p.event for p in parts][-1] == "end"
        run_id = parts[0].data["run_id"]
        interrupt = parts[-2].data["__interrupt__"][0]
        assert parts[-2].event == "values"
        assert {k: interrupt["value"][k] for k in ("kind", "tool", "call_id", "args", "run_id")} == {
            "kind": "approval", "tool": "wipe", "call_id": "c1", "args": {"path": "/tmp/old"}, "run_id": run_id}
        assert "wipe" in interrupt["value"]["message"]
        assert interrupt["value"]["action_requests"] == [  # the LangChain v1 human-in-the-loop shape
            {"name": "wipe", "args": {"path": "/tmp/old"}, "description": interrupt["value"]["message"]}]
        assert interrupt["value"]["review_configs"] == [{"action_name": "wipe",
                                                         "allowed_decisions": ["approve", "edit", "reject"]}]
        assert [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in p.data] == [
            [interrupt]]
        seen = await client.threads.get(thread)
        assert seen["status"] == "interrupted" and seen["interrupts"] == {run_id: [interrupt]}
        assert (await client.runs.get(thread, run_id))["status"] == "interrupted"
        assert tools.calls["wipe"] == []  # nothing runs before the decision

        with pytest.raises(UnprocessableEntityError):  # an edit without the edited arguments
            await client.runs.create(thread, "chat-react", command={"resume": {"decisions": [
                {"type": "edit", "edited_action": {"name": "wipe"}}]}})
        resumed = await collect(client.runs.stream(thread, "chat-react",
                                                   command={"resume": {"decisions": [{"type": "approve"}]}},
                                                   stream_mode=["messages-tuple", "custom"]))
        assert resumed[0].data["run_id"] == run_id and resumed[-1].event == "end"
        customs = [p.data for p in resumed if p.event == "custom"]
        assert [c["decision"] for c in customs if c["type"] == "approval.decision"] == ["approve"]
        assert any(c["type"] == "tool.result" and c["call_id"] == "c1" for c in customs)
        assert "".join(p.data[0]["content"] for p in resumed if p.event == "messages") == "/tmp/old is gone."
        assert tools.calls["wipe"] == [{"path": "/tmp/old"}]
        assert tool_messages(srv.requests()[1])["c1"]["result"] == {"deleted": "/tmp/old"}
        assert (await client.runs.get(thread, run_id))["status"] == "success"
        assert (await client.threads.get(thread))["status"] == "idle"

        second = await client.runs.wait(thread, "chat-react", input=ask("Now clean /"))
        [waiting] = second["__interrupt__"]
        assert waiting["value"]["args"] == {"path": "/"} and waiting["id"] != interrupt["id"]
        assert (await client.threads.get(thread))["status"] == "interrupted"
        answered = await client.runs.wait(thread, "chat-react", command={"resume": {"decisions": [
            {"type": "reject", "message": "not the root"}]}})
        assert answered["messages"][-1]["content"] == "I left / alone."
        assert tools.calls["wipe"] == [{"path": "/tmp/old"}]  # the refused call never ran
        refused = tool_messages(srv.requests()[3])["c2"]
        assert refused["ok"] is False and refused["error"]["code"] == "rejected"
        assert "not the root" in refused["error"]["message"]
        assert (await client.runs.get(thread, waiting["value"]["run_id"]))["status"] == "success"
        assert (await messages_of(client, thread))[-2:] == [("human", "Now clean /"), ("ai", "I left / alone.")]

        # A stateless run that stops at an approval has completed as far as its caller goes: its
        # thread is deleted, so nobody could resume it, and the run waiting there is stopped with it.
        created: list[Any] = []
        alone = await client.runs.wait(None, "chat-react", input=ask("Clean /srv"), on_run_created=created.append)
        assert alone["__interrupt__"][0]["value"]["args"] == {"path": "/srv"}
        native = await stack.client("lg-user")

        async def stopped() -> bool:
            task = (await native.get(f"/api/v1/tasks/{created[0]['run_id']}")).json()
            return task["status"] == "cancelled" and [t["thread_id"] for t in await client.threads.search()] == [
                thread]

        assert await eventually(stopped)
        assert tools.calls["wipe"] == [{"path": "/tmp/old"}]


async def test_join_a_failed_run_and_a_stateless_stream(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER, chunk_chars=4, delay_s=0.02), oai.reply("Said without a thread."),
                oai.auth_failure(), oai.auth_failure()])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-join")
        run = await client.runs.create("t-join", "chat-direct", input=ask("Capital of Norway?"))
        joined = await client.runs.join("t-join", run["run_id"])
        assert [(m["type"], m["content"]) for m in joined["messages"]] == [
            ("human", "Capital of Norway?"), ("ai", ANSWER)]
        assert (await client.runs.get("t-join", run["run_id"]))["status"] == "success"  # the record agrees

        parts = await collect(client.runs.stream(None, "chat-direct", input=ask("No thread?"),
                                                 stream_mode=["messages-tuple", "values"]))
        assert parts[0].event == "metadata" and parts[-1].event == "end"
        assert "".join(p.data[0]["content"] for p in parts if p.event == "messages") == "Said without a thread."
        assert parts[-2].event == "values" and parts[-2].data["messages"][-1]["content"] == "Said without a thread."

        async def only_the_kept_thread() -> bool:  # the stateless run's thread goes once its run has ended
            return [t["thread_id"] for t in await client.threads.search()] == ["t-join"]

        assert await eventually(only_the_kept_thread)

        failing = await client.runs.create("t-join", "chat-direct", input=ask("And again?"))
        error = (await client.runs.join("t-join", failing["run_id"]))["__error__"]
        assert error == {"error": "auth", "message": "The model provider refused the API key."}
        assert (await client.runs.get("t-join", failing["run_id"]))["status"] == "error"
        assert (await client.threads.get("t-join"))["status"] == "error"
        assert [t["thread_id"] for t in await client.threads.search(status="error")] == ["t-join"]
        streamed = await collect(client.runs.stream("t-join", "chat-direct", input=ask("Once more?")))
        assert [p.event for p in streamed][-1] == "error" and streamed[-1].data == error
        said = (await client.threads.get_state("t-join"))["values"]["messages"][-1]  # the failure, said in the thread
        assert (said["type"], said["response_metadata"]["message_type"], said["content"]) == (
            "ai", "error", error["message"])
        assert (await client.threads.get("t-join"))["status"] == "error"


async def test_cancel_keeps_the_partial_answer_and_stateless_runs_leave_no_thread(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.hang(HALF, seconds=600), oai.reply(ANSWER)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-cancel")
        run = await client.runs.create("t-cancel", "chat-direct", input=ask("Tell me"))
        await until_streaming(client, "t-cancel", run["run_id"])
        await client.runs.cancel("t-cancel", run["run_id"], wait=True)
        assert (await client.runs.get("t-cancel", run["run_id"]))["status"] == "interrupted"
        said = await messages_of(client, "t-cancel")
        assert said[0] == ("human", "Tell me") and HALF.startswith(said[1][1].strip())

        answered = await client.runs.wait(None, "chat-direct", input=ask("Capital of Norway?"))
        assert answered["messages"][-1]["content"] == ANSWER

        async def only_the_kept_thread() -> bool:  # the stateless run's thread goes once its run has ended
            return [t["thread_id"] for t in await client.threads.search()] == ["t-cancel"]

        assert await eventually(only_the_kept_thread)


async def test_query_parameters_are_read_or_refused_by_name(scripted: Settings, srv: oai.OpenAIServer) -> None:
    """What the SDKs put in a query is honoured (a run list's `status` and `select`, a stream
    join's `cancel_on_disconnect`) or refused naming it, never ignored; one no route reads is a 422."""
    srv.script([oai.reply(ANSWER), oai.hang(HALF, seconds=600)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-query")
        done = await client.runs.create("t-query", "chat-direct", input=ask("First?"))
        await client.runs.join("t-query", done["run_id"])
        going = await client.runs.create("t-query", "chat-direct", input=ask("Tell me"))
        await until_streaming(client, "t-query", going["run_id"])
        assert [r["run_id"] for r in await client.runs.list("t-query", status="success")] == [done["run_id"]]
        assert [r["run_id"] for r in await client.runs.list("t-query", status="running")] == [going["run_id"]]
        assert await client.runs.list("t-query", status="error") == []
        assert await client.runs.list("t-query", select=["run_id", "status"]) == [
            {"run_id": going["run_id"], "status": "running"}, {"run_id": done["run_id"], "status": "success"}]

        # A reader that joins with cancel_on_disconnect and leaves cancels the run.
        async with asyncio.timeout(WAIT_S):
            async for part in client.runs.join_stream("t-query", going["run_id"], stream_mode="messages-tuple",
                                                      cancel_on_disconnect=True):
                if part.event == "messages":
                    break

        async def cancelled() -> bool:
            return bool((await client.runs.get("t-query", going["run_id"]))["status"] == "interrupted")

        assert await eventually(cancelled)

        native = await stack.client("lg-user")
        for path, param in (("/lg/threads/t-query/state?select=values", "select"),
                            ("/lg/threads/t-query?include=ttl", "include"),
                            (f"/lg/threads/t-query/runs?state={going['run_id']}", "state"),
                            ("/lg/threads/t-query/history?limit=2&page=3", "page")):
            refused = await native.get(path)
            assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == param, refused.text


WORKFLOW = {"version": "1", "nodes": [{"id": "in", "kind": "input"},
                                      {"id": "out", "kind": "output", "config": {"value": "{{ in }}"}}],
            "edges": [{"source": "in", "target": "out"}]}


async def test_auth_guardrail_workflows_and_ownership(settings: Settings) -> None:
    async with chat_stack(settings.model_copy(update={"guardrail_blocklist": ["frobnicate"]}),
                          with_dispatcher=False) as stack:
        with pytest.raises(AuthenticationError):
            await get_client(url=stack.gateways[0].url + "/lg", api_key=None).threads.search()
        alice, bob = lg(stack, "alice"), lg(stack, "bob")
        native = await stack.client("alice")
        saved = await native.post("/api/v1/workflows", json={"name": "Echo", "dsl": WORKFLOW})
        assert saved.status_code in (200, 201), saved.text
        found = await alice.assistants.search(graph_id="workflow")
        assert [(a["assistant_id"], a["name"]) for a in found] == [(saved.json()["id"], "Echo")]
        assert await bob.assistants.search(graph_id="workflow") == []
        with pytest.raises(NotFoundError):
            await bob.assistants.get(saved.json()["id"])
        await alice.threads.create(thread_id="t-alice")
        with pytest.raises(UnprocessableEntityError):  # a workflow is not a thread's turn
            await alice.runs.create("t-alice", saved.json()["id"], input=ask("hi"))
        with pytest.raises(BadRequestError):
            await alice.runs.create("t-alice", "chat-direct", input=ask("please frobnicate it"))
        with pytest.raises(NotFoundError):
            await bob.threads.get("t-alice")
        with pytest.raises(ConflictError):  # the id is taken, whoever holds it
            await bob.threads.create(thread_id="t-alice", if_exists="do_nothing")
        with pytest.raises(NotFoundError):
            await alice.runs.create("t-nobody", "chat-direct", input=ask("hi"))
        made = await alice.runs.create("t-new", "chat-direct", input=ask("hi"), if_not_exists="create")
        assert made["thread_id"] == "t-new" and made["status"] == "pending"  # no dispatcher here
