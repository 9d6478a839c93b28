"""The LangChain v1 human-in-the-loop `edit` decision over `/lg`, driven by the real
`langgraph-sdk`: a high-risk tool call approved with edited arguments runs with them, and the
model reads that it made that call (its conversation shows the edited arguments)."""

from __future__ import annotations

import json

from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.integration.test_langgraph_api import ask, collect, lg
from tests.integration.test_tool_approval import CountingTools, tool_messages
from tests.support import openai_server as oai


async def test_an_edited_tool_call_runs_with_the_edited_arguments(scripted: Settings, srv: oai.OpenAIServer) -> None:
    tools = CountingTools()
    srv.script([oai.reply(tool_calls=[oai.tool_call("wipe", {"path": "/"}, id="c1")]),
                oai.reply("Cleaned /tmp instead.")])
    async with chat_stack(scripted, tools=tools.registry) as stack:
        client = lg(stack)
        thread = (await client.threads.create())["thread_id"]
        paused = await client.runs.wait(thread, "chat-react", input=ask("Clean up"))
        [interrupt] = paused["__interrupt__"]
        assert interrupt["value"]["review_configs"][0]["allowed_decisions"] == ["approve", "edit", "reject"]
        assert tools.calls["wipe"] == []

        resumed = await collect(client.runs.stream(thread, "chat-react", command={"resume": {"decisions": [
            {"type": "edit", "edited_action": {"name": "wipe", "args": {"path": "/tmp"}}}]}},
            stream_mode=["custom", "values"]))
        assert resumed[-1].event == "end"
        customs = [p.data for p in resumed if p.event == "custom"]
        assert [c["decision"] for c in customs if c["type"] == "approval.decision"] == ["approve"]
        assert [c["args"] for c in customs if c["type"] == "tool.call"] == [{"path": "/tmp"}]
        assert tools.calls["wipe"] == [{"path": "/tmp"}]  # never the model's "/"
        answer = srv.requests()[1]
        assert tool_messages(answer)["c1"]["result"] == {"deleted": "/tmp"}
        [made] = [m for m in answer["body"]["messages"] if m.get("tool_calls")]
        assert json.loads(made["tool_calls"][0]["function"]["arguments"]) == {"path": "/tmp"}
        assert resumed[-2].data["messages"][-1]["content"] == "Cleaned /tmp instead."
