"""`/lg` stream modes beyond values/updates/messages-tuple, driven by the real `langgraph-sdk`:
the legacy `messages`, `events` (astream_events shapes), `tasks`, `checkpoints` and `debug` are
made from the one run feed, resumable like the others; `tools` and `lifecycle` stay a 422."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import UnprocessableEntityError

from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.integration.test_langgraph_api import ANSWER, ask, collect, lg
from tests.support import openai_server as oai

MODES = ["messages", "events", "tasks", "checkpoints", "debug"]


async def test_every_extra_mode_streams_what_langgraph_clients_read(scripted: Settings, srv: oai.OpenAIServer) -> None:
    srv.script([oai.reply("One."), oai.reply(ANSWER, chunk_chars=5)])
    async with chat_stack(scripted) as stack:
        client = lg(stack)
        await client.threads.create(thread_id="t-extra")
        await client.runs.wait("t-extra", "chat-direct", input=ask("First?"))
        first_id = (await client.threads.get_state("t-extra"))["checkpoint"]["checkpoint_id"]
        parts = await collect(client.runs.stream("t-extra", "chat-direct", input=ask("Capital of Norway?"),
                                                 stream_mode=MODES))
        names = [p.event for p in parts]
        assert names[0] == "metadata" and names[-1] == "end", names
        run_id = parts[0].data["run_id"]

        partial = [p.data[0] for p in parts if p.event == "messages/partial"]
        assert partial and partial[-1]["content"] == ANSWER and partial[-1]["type"] == "ai"
        assert [len(m["content"]) for m in partial] == sorted(len(m["content"]) for m in partial)
        [meta] = [p.data for p in parts if p.event == "messages/metadata"]
        assert meta[f"run-{run_id}"]["metadata"]["langgraph_node"] == "ans"
        assert [p.data[0]["content"] for p in parts if p.event == "messages/complete"] == [ANSWER]

        events = [p.data for p in parts if p.event == "events"]
        assert (events[0]["event"], events[0]["name"]) == ("on_chain_start", "LangGraph")
        assert (events[-1]["event"], events[-1]["name"]) == ("on_chain_end", "LangGraph")
        streamed = [e["data"]["chunk"]["content"] for e in events if e["event"] == "on_chat_model_stream"]
        assert "".join(streamed) == ANSWER
        assert events[-1]["data"]["output"]["messages"][-1]["content"] == ANSWER

        tasks = [p.data for p in parts if p.event == "tasks"]
        started = [t for t in tasks if "triggers" in t]
        ended = [t for t in tasks if "result" in t]
        assert "ans" in {t["name"] for t in started} and {t["id"] for t in started} == {t["id"] for t in ended}

        # The run's two checkpoints, as history shows them: its question's, then its own.
        question, checkpoint = [p.data for p in parts if p.event == "checkpoints"]
        assert checkpoint["config"]["configurable"]["checkpoint_id"] == run_id
        asked = checkpoint["parent_config"]["configurable"]["checkpoint_id"]
        assert question["config"]["configurable"]["checkpoint_id"] == asked and question["next"] == ["ans"]
        assert question["parent_config"]["configurable"]["checkpoint_id"] == first_id
        history = await client.threads.get_history("t-extra")
        assert checkpoint["values"] == history[0]["values"] and checkpoint["next"] == []
        assert question["values"] == history[1]["values"]
        assert [(c["metadata"]["step"], c["config"]["configurable"]["checkpoint_id"]) for c in (question, checkpoint)] \
            == [(h["metadata"]["step"], h["checkpoint"]["checkpoint_id"]) for h in history[1::-1]]
        debug = [p.data["type"] for p in parts if p.event == "debug"]
        assert debug[-1] == "checkpoint" and {"task", "task_result"} <= set(debug)

        # Rejoined after any frame: the same frames with the same ids, none lost or repeated.
        cut = len(parts) // 3
        rest = await collect(client.runs.join_stream("t-extra", run_id, last_event_id=parts[cut].id,
                                                     stream_mode=MODES))
        assert [(p.event, p.id, p.data) for p in rest[:-1]] == [(p.event, p.id, p.data) for p in parts[cut + 1:-1]]

        for refused in ("tools", "lifecycle"):
            with pytest.raises(UnprocessableEntityError):
                await collect(client.runs.stream("t-extra", "chat-direct", input=ask("x"), stream_mode=[refused]))
