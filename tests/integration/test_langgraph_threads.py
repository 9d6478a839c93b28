"""`/lg` threads and runs beyond a thread's turn, driven by the real `langgraph-sdk`: every body
field the SDK sends is supported or refused with a 422 naming it; thread metadata, search,
count, update, copy and prune; history and checkpoints; stateless and batch runs, bulk cancel."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from shared.settings import Settings
from tests.integration.chat_support import WAIT_S, chat_stack
from tests.integration.test_langgraph_api import ANSWER, HALF, ask, collect, lg, until_streaming
from tests.support import openai_server as oai
from tests.support.wait import eventually


def _named(exc: pytest.ExceptionInfo[UnprocessableEntityError], field: str) -> bool:
    body: Any = exc.value.body
    return any(field in (item.get("field", "") + " " + item.get("message", "")) for item in body["errors"])


HUMAN_Z = {"type": "human", "content": "z"}
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"webhook": "http://10.0.0.8/hook"}, "webhook"),  # supported, but a private target is refused (SSRF)
    ({"interrupt_before": ["ans"]}, "interrupt_before"),
    ({"interrupt_after": "*"}, "interrupt_after"),
    ({"feedback_keys": ["good"]}, "feedback_keys"),
    ({"after_seconds": 30}, "after_seconds"),
    ({"config": {"configurable": {"temperature": 0.2}}}, "config.configurable.temperature"),
    ({"config": {"recursion_limit": 5}}, "config.recursion_limit"),
    ({"context": {"tone": "dry"}}, "context.tone"),
    ({"command": {"goto": "plan"}}, "command.goto"),  # the answer node and `__end__`: test_langgraph_command.py
    ({"stream_mode": ["values", "tools"]}, "stream_mode: tools"),
]


async def test_every_field_is_supported_or_refused_by_name(settings: Settings) -> None:
    async with chat_stack(settings, with_dispatcher=False) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-refused")
        for extra, field in REFUSED:
            with pytest.raises(UnprocessableEntityError) as refused:
                await collect(client.runs.stream("t-refused", "chat-direct", input=ask("hi"), **extra))
            assert _named(refused, field), (field, refused.value.body)
        native = await stack.client("lg-user")
        sent = await native.post("/lg/threads/t-refused/runs", json={"input": ask("hi"), "nonsense": 1})
        assert sent.status_code == 422 and sent.json()["errors"][0]["field"] == "nonsense"
        made = await client.runs.create(  # what asks for nothing Agentix lacks is accepted
            "t-refused", "chat-direct", input=ask("hi"), durability="sync", stream_resumable=True,
            config={"configurable": {"model": "gpt-test"}}, interrupt_before=[], webhook=None)
        assert made["status"] == "pending"
        assert (await client.threads.get_state("t-refused"))["values"]["messages"][-1]["content"] == "hi"



async def test_metadata_is_kept_searched_counted_updated_copied_and_pruned(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("Oslo."), oai.reply("Bergen.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        made = await client.threads.create(thread_id="t-meta-a", metadata={"user_id": "123", "topic": "geo"})
        assert made["metadata"]["user_id"] == "123" and made["metadata"]["topic"] == "geo"
        await client.threads.create(thread_id="t-meta-b", metadata={"user_id": "123", "topic": "art"})
        await client.threads.create(thread_id="t-meta-c", metadata={"user_id": "456"})
        found = await client.threads.search(metadata={"user_id": "123"}, sort_by="thread_id", sort_order="asc")
        assert [t["thread_id"] for t in found] == ["t-meta-a", "t-meta-b"]
        assert [t["thread_id"] for t in await client.threads.search(metadata={"user_id": "123", "topic": "art"})] == [
            "t-meta-b"]
        assert await client.threads.count(metadata={"user_id": "123"}) == 2
        assert await client.threads.count(metadata={"nobody": True}) == 0
        page = await client.threads.search(sort_by="thread_id", sort_order="desc", limit=1, offset=1,
                                           select=["thread_id", "metadata"])
        assert page == [{"thread_id": "t-meta-b", "metadata": page[0]["metadata"]}]

        await client.runs.wait("t-meta-a", "chat-direct", input=ask("Capital of Norway?"))
        ran = (await client.threads.get("t-meta-a"))["metadata"]
        assert (ran["assistant_id"], ran["graph_id"], ran["topic"]) == ("chat-direct", "chat", "geo")
        said = await client.threads.search(values={"messages": (await client.threads.get("t-meta-a"))["values"][
            "messages"]})
        assert [t["thread_id"] for t in said] == ["t-meta-a"]
        assert [t["thread_id"] for t in await client.threads.search(status="idle", metadata={"graph_id": "chat"})] == [
            "t-meta-a"]

        updated = await client.threads.update("t-meta-a", metadata={"topic": "capitals", "stars": 5})
        assert (updated["metadata"]["topic"], updated["metadata"]["stars"], updated["metadata"]["user_id"]) == (
            "capitals", 5, "123")
        twin = await client.threads.copy("t-meta-a")
        assert twin["thread_id"] != "t-meta-a" and twin["metadata"]["topic"] == "capitals"
        assert [(m["type"], m["content"]) for m in twin["values"]["messages"]] == [
            ("human", "Capital of Norway?"), ("ai", "Oslo.")]
        answered = await client.runs.wait(twin["thread_id"], "chat-direct", input=ask("And its second city?"))
        assert [m["content"] for m in answered["messages"]] == ["Capital of Norway?", "Oslo.", "And its second city?",
                                                                "Bergen."]
        assert len((await client.threads.get("t-meta-a"))["values"]["messages"]) == 2  # the original is untouched

        pruned = await client.threads.prune(["t-meta-b", "t-meta-c", "t-nobody"])
        assert pruned == {"pruned_count": 2}
        left = {t["thread_id"] for t in await client.threads.search()}
        assert left == {"t-meta-a", twin["thread_id"]}
        with pytest.raises(UnprocessableEntityError):
            await client.threads.prune(["t-meta-a"], strategy="keep_latest")
        with pytest.raises(UnprocessableEntityError):
            await client.threads.create(ttl=60)


async def test_history_is_each_turns_question_then_its_answer_newest_first(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("One."), oai.reply("Two."), oai.reply("Three.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-hist")
        empty = await client.threads.get_state("t-hist")
        assert empty["values"] == {"messages": []} and empty["checkpoint"]["checkpoint_id"] is None
        assert await client.threads.get_history("t-hist") == []
        run_ids = []
        for n, word in enumerate(("first", "second", "third")):
            run = await client.runs.create("t-hist", "chat-direct", input=ask(f"The {word}?"), metadata={"n": n})
            await client.runs.join("t-hist", run["run_id"])
            run_ids.append(run["run_id"])
        states = await client.threads.get_history("t-hist", limit=10)
        ids = [s["checkpoint"]["checkpoint_id"] for s in states]
        # Each turn's own checkpoint (its run's id) after its question's, then the thread's start.
        assert len(states) == 7 and ids[0:6:2] == run_ids[::-1]
        assert [s["parent_checkpoint"] and s["parent_checkpoint"]["checkpoint_id"] for s in states] == [*ids[1:], None]
        assert [len(s["values"]["messages"]) for s in states] == [6, 5, 4, 3, 2, 1, 0]
        assert [s["metadata"].get("n") for s in states] == [2, 2, 1, 1, 0, 0, None]
        assert [s["metadata"]["step"] for s in states] == [5, 4, 3, 2, 1, 0, -1]
        assert [s["next"] for s in states] == [[], ["ans"], [], ["ans"], [], ["ans"], []]
        assert all(s["created_at"] for s in states) and states[0]["tasks"] == []
        assert states[0]["checkpoint"]["thread_id"] == "t-hist" and states[0]["checkpoint"]["checkpoint_ns"] == ""

        latest = await client.threads.get_state("t-hist")
        assert latest["checkpoint"] == states[0]["checkpoint"] and latest["values"] == states[0]["values"]
        paged = await client.threads.get_history("t-hist", limit=1, before=states[0]["checkpoint"])
        assert [s["checkpoint"]["checkpoint_id"] for s in paged] == ids[1:2]
        older = await client.threads.get_history("t-hist", limit=5, checkpoint={"checkpoint_id": run_ids[1]})
        assert [s["checkpoint"]["checkpoint_id"] for s in older] == ids[2:]
        assert [s["checkpoint"]["checkpoint_id"]
                for s in await client.threads.get_history("t-hist", metadata={"n": 1})] == ids[2:4]
        first = await client.threads.get_state("t-hist", checkpoint_id=run_ids[0])
        assert [m["content"] for m in first["values"]["messages"]] == ["The first?", "One."]
        assert (await client.threads.get_state("t-hist", checkpoint={"checkpoint_id": run_ids[0]}))["values"] == first[
            "values"]
        native = await stack.client("lg-user")
        got = await native.get("/lg/threads/t-hist/history", params={"limit": 2})
        assert [s["checkpoint"]["checkpoint_id"] for s in got.json()] == ids[:2]
        with pytest.raises(NotFoundError):
            await client.threads.get_state("t-hist", checkpoint_id="nope")


async def test_stateless_background_and_batch_runs_and_cancelling_many(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply("Alone."), oai.reply("Batched."), oai.hang(HALF, seconds=600)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        run = await client.runs.create(None, "chat-direct", input=ask("Background?"), on_completion="keep")
        assert run["status"] in ("pending", "running") and run["thread_id"]
        assert (await client.runs.join(run["thread_id"], run["run_id"]))["messages"][-1]["content"] == "Alone."
        batch = await client.runs.create_batch([{"assistant_id": "chat-direct", "input": ask("Batch?"),
                                                 "on_completion": "keep"}])
        assert len(batch) == 1
        joined = await client.runs.join(batch[0]["thread_id"], batch[0]["run_id"])
        assert joined["messages"][-1]["content"] == "Batched."
        with pytest.raises(UnprocessableEntityError):
            await client.runs.create_batch([{"assistant_id": "chat-direct", "input": ask("x"),
                                             "webhook": "http://127.0.0.1:9/cb"}])  # loopback: refused
        threads_before = await client.threads.count()
        with pytest.raises(UnprocessableEntityError) as refused:  # a later body's command: no run starts
            await client.runs.create_batch([{"assistant_id": "chat-direct", "input": ask("y")},
                                            {"assistant_id": "chat-direct", "command": {"goto": "plan"}}])
        assert [e["field"] for e in refused.value.body["errors"]] == ["[1].command.goto"]  # type: ignore[index]
        with pytest.raises(UnprocessableEntityError) as refused:  # and a later body's input
            await client.runs.create_batch([{"assistant_id": "chat-direct", "input": ask("y")},
                                            {"assistant_id": "chat-direct", "input": {"messages": [
                                                {"type": "system", "content": "Be brief."}, HUMAN_Z]}}])
        assert [e["field"] for e in refused.value.body["errors"]] == ["[1].input.messages"]  # type: ignore[index]
        assert await client.threads.count() == threads_before

        await client.threads.create(thread_id="t-many")
        going = await client.runs.create("t-many", "chat-direct", input=ask("Go on and on"))
        await until_streaming(client, "t-many", going["run_id"])
        await client.runs.cancel_many(thread_id="t-many", run_ids=[going["run_id"]])
        await client.runs.join("t-many", going["run_id"])
        assert (await client.runs.get("t-many", going["run_id"]))["status"] == "interrupted"
        await client.runs.cancel_many(status="running")  # nothing left going: nothing to do


async def test_on_disconnect_cancel_stops_the_run_when_the_reader_leaves(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.hang(HALF, seconds=600)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-drop")
        run_id = None
        parts = client.runs.stream("t-drop", "chat-direct", input=ask("Go on"), stream_mode="messages-tuple",
                                   on_disconnect="cancel")
        async with contextlib.aclosing(parts), asyncio.timeout(WAIT_S):
            async for part in parts:
                if part.event == "metadata":
                    run_id = part.data["run_id"]
                if part.event == "messages":
                    break  # the reader leaves mid-answer
        assert run_id is not None

        async def stopped() -> bool:
            return (await client.runs.get("t-drop", run_id))["status"] == "interrupted"

        assert await eventually(stopped)


async def test_join_the_thread_stream_of_whatever_run_goes(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply(ANSWER, chunk_chars=4, delay_s=0.02)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-join-thread")
        with pytest.raises(NotFoundError):
            await collect(await client.threads.join_stream("t-join-thread"))
        run = await client.runs.create("t-join-thread", "chat-direct", input=ask("Capital of Norway?"))
        parts = await collect(await client.threads.join_stream("t-join-thread"))
        assert parts[0].event == "metadata" and parts[0].data["run_id"] == run["run_id"] and parts[-1].event == "end"
        assert "".join(p.data[0]["content"] for p in parts if p.event == "messages") == ANSWER
        middle = next(p.id for p in parts if p.event == "messages")
        rest = await collect(await client.threads.join_stream("t-join-thread", last_event_id=middle))
        assert [p.id for p in rest if p.event != "end"] == [p.id for p in parts[parts.index(
            next(p for p in parts if p.id == middle)) + 1:] if p.event != "end"]
        with pytest.raises(UnprocessableEntityError):
            await collect(await client.threads.join_stream("t-join-thread", stream_mode="lifecycle"))
        # A turn update_state added is the thread's latest: joining the thread's stream shows its
        # state and ends (it used to wait for an end that turn's log never got).
        await client.threads.update_state("t-join-thread", {"messages": [{"type": "human", "content": "Noted."}]})
        async with asyncio.timeout(WAIT_S):
            added = await collect(await client.threads.join_stream("t-join-thread"))
        assert [p.event for p in added][-1] == "end"
        assert added[0].data["run_id"] != run["run_id"]


async def test_deleting_an_ended_run_removes_its_turn(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply("One."), oai.reply("Two."), oai.hang(HALF, seconds=600)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-del-run")
        first = await client.runs.create("t-del-run", "chat-direct", input=ask("First?"))
        await client.runs.join("t-del-run", first["run_id"])
        second = await client.runs.create("t-del-run", "chat-direct", input=ask("Second?"))
        await client.runs.join("t-del-run", second["run_id"])
        await client.runs.delete("t-del-run", first["run_id"])
        with pytest.raises(NotFoundError):
            await client.runs.get("t-del-run", first["run_id"])
        state = await client.threads.get_state("t-del-run")
        assert [m["content"] for m in state["values"]["messages"]] == ["Second?", "Two."]
        assert [s["metadata"].get("run_id") for s in await client.threads.get_history("t-del-run")] == [
            second["run_id"], second["run_id"], None]  # its answer, its question, the thread's start
        going = await client.runs.create("t-del-run", "chat-direct", input=ask("Go on"))
        await until_streaming(client, "t-del-run", going["run_id"])
        with pytest.raises(ConflictError):
            await client.runs.delete("t-del-run", going["run_id"])
        await client.runs.cancel("t-del-run", going["run_id"], wait=True)


async def test_update_state_adds_a_turn_the_next_run_goes_on_from(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply("It is Oslo, as said.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-update")
        made = await client.threads.update_state("t-update", {"messages": [
            {"type": "human", "content": "Capital of Norway?", "id": "m-q"},
            {"type": "ai", "content": "Oslo."}]}, as_node="ans")
        update_id = made["checkpoint"]["checkpoint_id"]
        state = await client.threads.get_state("t-update")
        assert state["checkpoint"]["checkpoint_id"] == update_id
        assert [(m["type"], m["content"]) for m in state["values"]["messages"]] == [
            ("human", "Capital of Norway?"), ("ai", "Oslo.")]
        assert state["metadata"]["source"] == "update" and state["metadata"]["as_node"] == "ans"
        answered = await client.runs.wait("t-update", "chat-direct", input=ask("Sure?"))
        assert [m["content"] for m in answered["messages"]] == ["Capital of Norway?", "Oslo.", "Sure?",
                                                                "It is Oslo, as said."]
        said = [m["content"] for m in srv.requests()[0]["body"]["messages"]]
        assert said[-3:] == ["Capital of Norway?", "Oslo.", "Sure?"]  # the model read the added turn
        history = await client.threads.get_history("t-update")
        assert history[2]["checkpoint"]["checkpoint_id"] == update_id  # under the answer and its question
        with pytest.raises(UnprocessableEntityError):  # an edit of a message the thread has
            await client.threads.update_state("t-update", {"messages": [{"type": "human", "content": "x",
                                                                         "id": "m-q"}]})
        # An older checkpoint starts a branch: test_langgraph_fork.py.


async def test_messages_keep_the_ids_and_the_order_the_client_gave_them(scripted: Settings,
                                                                        srv: oai.OpenAIServer) -> None:
    """A client's message ids are kept as it gave them (a UI keys its messages by them), and turns
    keep the order they were said in, whatever the ids; the thread's own ids are distinct."""
    srv.script([oai.reply("Bergen is rainy."), oai.reply("Tromsø is north.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-ids")
        said = [{"type": "human", "content": "Capital of Norway?", "id": "z-question"},
                {"type": "ai", "content": "Oslo.", "id": "y-answer"},
                {"type": "human", "content": "And its second city?"},  # no id: the thread gives one
                {"type": "ai", "content": "Bergen."}]
        made = await client.threads.update_state("t-ids", {"messages": said})
        answered = await client.runs.wait("t-ids", "chat-direct", input={"messages": [
            {"type": "human", "content": "Weather there?", "id": "b-weather"}]})
        assert [m["content"] for m in answered["messages"]] == [
            "Capital of Norway?", "Oslo.", "And its second city?", "Bergen.", "Weather there?", "Bergen is rainy."]
        ids = [m["id"] for m in answered["messages"]]
        assert ids[:2] == ["z-question", "y-answer"] and ids[4] == "b-weather"
        assert len(set(ids)) == len(ids) and all(ids)
        # The update's last human message as the run's question keeps its id too.
        await client.runs.wait("t-ids", "chat-direct", command={"update": {"messages": [
            {"type": "human", "content": "And the north?", "id": "a-north"}]}})
        state = await client.threads.get_state("t-ids")
        assert [(m["id"], m["content"]) for m in state["values"]["messages"]][-2] == ("a-north", "And the north?")
        with pytest.raises(UnprocessableEntityError):  # the thread has that message, said otherwise: an edit
            await client.runs.create("t-ids", "chat-direct", input={"messages": [
                {"type": "human", "content": "Again", "id": "b-weather"}]})
        # A message's id is its branch's: on a branch from the update's checkpoint, "b-weather" is new.
        branched = await client.threads.update_state("t-ids", {"messages": [
            {"type": "human", "content": "Rain in Bergen?", "id": "b-weather"}]},
            checkpoint_id=made["checkpoint"]["checkpoint_id"])
        state = await client.threads.get_state("t-ids", checkpoint_id=branched["checkpoint"]["checkpoint_id"])
        assert [m["id"] for m in state["values"]["messages"]][-1] == "b-weather"
        assert state["values"]["messages"][-1]["content"] == "Rain in Bergen?"
        # Another thread may use the same ids (a message's id is its thread's).
        await client.threads.create(thread_id="t-ids-2")
        await client.threads.update_state("t-ids-2", {"messages": [said[0]]})
        state = await client.threads.get_state("t-ids-2")
        assert [m["id"] for m in state["values"]["messages"]] == ["z-question"]


async def test_an_inputs_earlier_messages_are_said_before_its_question(scripted: Settings,
                                                                       srv: oai.OpenAIServer) -> None:
    """`input.messages` is added to the thread as LangGraph adds it: the messages before the last
    (the question) are said first, so the model reads them; a stateless run with a whole
    conversation as its input answers in that conversation. What the chat agent cannot keep is refused."""
    srv.script([oai.reply("Bergen."), oai.reply("About 290,000.")])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-history")
        answered = await client.runs.wait("t-history", "chat-direct", input={"messages": [
            {"role": "user", "content": "Capital of Norway?"}, {"role": "assistant", "content": "Oslo."},
            {"role": "user", "content": "Second city?"}]})
        assert [(m["type"], m["content"]) for m in answered["messages"]] == [
            ("human", "Capital of Norway?"), ("ai", "Oslo."), ("human", "Second city?"), ("ai", "Bergen.")]
        assert [m["content"] for m in srv.requests()[0]["body"]["messages"]][-3:] == [
            "Capital of Norway?", "Oslo.", "Second city?"]
        stateless = await client.runs.wait(None, "chat-direct", input={"messages": [
            {"type": "human", "content": "Second city of Norway?"}, {"type": "ai", "content": "Bergen."},
            {"type": "human", "content": "How many live there?"}]})
        assert stateless["messages"][-1]["content"] == "About 290,000."
        assert [m["content"] for m in srv.requests()[1]["body"]["messages"]][-3:] == [
            "Second city of Norway?", "Bergen.", "How many live there?"]
        for said, why in [([{"type": "system", "content": "Be brief."}, {"type": "human", "content": "Hi"}], "system"),
                          ([{"type": "human", "content": "Hi"}, {"type": "ai", "content": "Hello"}], "question"),
                          ([{"type": "human", "content": [{"type": "text", "text": "What is this?"},
                                                          {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}],
                           "image")]:
            with pytest.raises(UnprocessableEntityError) as refused:
                await client.runs.create("t-history", "chat-direct", input={"messages": said})
            assert _named(refused, "input.messages"), why
        with pytest.raises(UnprocessableEntityError) as refused:  # a state key the chat agent does not have
            await client.runs.create("t-history", "chat-direct",
                                     input={"messages": [{"type": "human", "content": "Hi"}], "topic": "geography"})
        assert _named(refused, "input.topic")


async def test_remote_graph_as_a_subgraph_sends_the_whole_conversation_each_turn(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    """LangGraph's `RemoteGraph` as a node of a local graph sends the parent's whole state on the
    same thread every turn, the messages the thread already has included (with the ids it gave
    them): those are kept as they are, as LangGraph's `add_messages` keeps them, and only the new
    question is asked."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.pregel.remote import RemoteGraph

    srv.script([oai.reply("Oslo."), oai.reply("Bergen."), oai.reply("Tromsø.", chunk_chars=3),
                oai.reply("Kristiansand.")])
    async with chat_stack(scripted) as stack:
        remote = RemoteGraph("chat-direct", client=lg(stack))
        parent = StateGraph(MessagesState).add_node("agent", remote).add_edge(START, "agent").compile(
            checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "t-remote"}}
        first = await parent.ainvoke({"messages": [("user", "Capital of Norway?")]}, config)
        assert [m.content for m in first["messages"]] == ["Capital of Norway?", "Oslo."]
        second = await parent.ainvoke({"messages": [("user", "Second city?")]}, config)
        assert [m.content for m in second["messages"]] == ["Capital of Norway?", "Oslo.", "Second city?", "Bergen."]
        state = await lg(stack).threads.get_state("t-remote")
        assert [m["content"] for m in state["values"]["messages"]] == [
            "Capital of Norway?", "Oslo.", "Second city?", "Bergen."]  # nothing said twice
        assert [m["content"] for m in srv.requests()[1]["body"]["messages"]][-3:] == [
            "Capital of Norway?", "Oslo.", "Second city?"]
        # The remote thread read through RemoteGraph itself: its state, history and an update.
        snapshot = await remote.aget_state(config)
        assert [m["content"] for m in snapshot.values["messages"]][-1] == "Bergen." and snapshot.next == ()
        assert len([s async for s in remote.aget_state_history(config)]) == 5  # the start, 2 questions, 2 answers
        await remote.aupdate_state(config, {"messages": [{"type": "human", "content": "Thanks."}]})
        assert [m["content"] for m in (await remote.aget_state(config)).values["messages"]][-1] == "Thanks."
        # Its tokens, streamed as LangGraph's `messages` mode gives them (message chunk, metadata).
        streamed = [part async for part in remote.astream({"messages": [("user", "North?")]}, config,
                                                          stream_mode="messages")]
        assert "".join(chunk["content"] for chunk, _ in streamed) == "Tromsø."
        # With the recursion limit LangGraph code often raises (RemoteGraph sends it on): it holds.
        deep = await remote.ainvoke({"messages": [("user", "South?")]}, {**config, "recursion_limit": 100})
        assert deep["messages"][-1]["content"] == "Kristiansand."
