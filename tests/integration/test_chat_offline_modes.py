"""The three chat modes end to end on the offline model (no model endpoint at all), through the
chat API: in `react` it calls the tool a request asks for — remember, recall, search, compute
(high-risk: after an approval) — and answers from the result; in `plan` it writes a JSON plan,
shown as a `plan` event, then carries it out; in `direct` it answers without tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from shared.bus.tools import ToolContext, ToolRegistry
from shared.settings import Settings
from tests.integration.chat_support import (
    ENDED,
    ChatStack,
    chat_stack,
    events_of,
    frames,
    new_conversation,
    run_state,
    say,
    thread,
)


class UpsertArgs(BaseModel):
    key: str
    value: Any
    user_id: str


class ListArgs(BaseModel):
    user_id: str


class SearchArgs(BaseModel):
    kb: str
    query: str
    user_id: str


class CodeArgs(BaseModel):
    code: str


class FakeTools:
    """Stand-ins of the real tools (same names, same argument names), recording every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.memory: dict[tuple[str, str], Any] = {}
        self.registry = reg = ToolRegistry("go")

        @reg.tool(name="memory_upsert", title="Remember", description="Store a memory.", inject=("user_id",))
        async def memory_upsert(args: UpsertArgs, ctx: ToolContext) -> dict[str, Any]:
            self.calls.append(("memory_upsert", args.model_dump()))
            self.memory[(args.user_id, args.key)] = args.value
            return {"key": args.key, "value": args.value}

        @reg.tool(name="memory_list", title="Recall", description="List memories.", inject=("user_id",))
        async def memory_list(args: ListArgs, ctx: ToolContext) -> dict[str, Any]:
            self.calls.append(("memory_list", args.model_dump()))
            items = [{"key": k, "value": v} for (user, k), v in self.memory.items() if user == args.user_id]
            return {"items": items, "next_cursor": None}

        @reg.tool(name="kb_search", title="Search", description="Search a KB.", inject=("user_id",))
        async def kb_search(args: SearchArgs, ctx: ToolContext) -> dict[str, Any]:
            self.calls.append(("kb_search", args.model_dump()))
            return {"chunks": [{"text": f"Staff get 25 days of {args.query} a year.", "score": 0.9}]}

        @reg.tool(name="code_exec", title="Run code", description="Run Python.", high_risk=True)
        async def code_exec(args: CodeArgs, ctx: ToolContext) -> dict[str, Any]:
            self.calls.append(("code_exec", args.model_dump()))
            return {"stdout": "84\n" if args.code == "print(12*(3+4))" else "?\n", "exit_code": 0}


@pytest.fixture
def tools() -> FakeTools:
    return FakeTools()


@pytest.fixture
async def stack(settings: Settings, tools: FakeTools) -> AsyncIterator[ChatStack]:
    assert settings.llm_base_url is None  # the offline model answers
    async with chat_stack(settings, tools=tools.registry) as running:
        yield running


async def answer_of(client: Any, conversation: str, run_id: str) -> dict[str, Any]:
    assert (await run_state(client, run_id, ENDED))["state"] == "succeeded"
    return (await thread(client, conversation))[-1]


async def test_react_remembers_then_recalls_then_searches(stack: ChatStack, tools: FakeTools) -> None:
    alice = await stack.client("alice-offline")
    conversation = await new_conversation(alice, mode="react")
    run_id = (await say(alice, conversation, "Remember that my favourite colour is blue"))["run"]["id"]
    kinds = [f.event for f in await events_of(alice, run_id)]
    assert kinds.index("tool.input") < kinds.index("tool.call") < kinds.index("tool.result") < kinds.index("done")
    answer = await answer_of(alice, conversation, run_id)
    assert answer["content"] == "I will remember that favourite_colour: blue."
    assert tools.calls == [("memory_upsert", {"key": "favourite_colour", "value": "blue", "user_id": "alice-offline"})]

    run_id = (await say(alice, conversation, "What do you remember about me?"))["run"]["id"]
    answer = await answer_of(alice, conversation, run_id)
    assert answer["content"] == "I remember: favourite_colour: blue."
    assert [s["name"] for s in answer["tool_events"]] == ["memory_list"]

    run_id = (await say(alice, conversation, "Search the handbook kb for vacation"))["run"]["id"]
    answer = await answer_of(alice, conversation, run_id)
    assert tools.calls[-1] == ("kb_search", {"kb": "handbook", "query": "vacation", "user_id": "alice-offline"})
    assert answer["content"] == "From the knowledge base: Staff get 25 days of vacation a year."


async def test_react_computes_with_code_exec_after_the_approval(stack: ChatStack, tools: FakeTools) -> None:
    bob = await stack.client()
    conversation = await new_conversation(bob, mode="react")
    run_id = (await say(bob, conversation, "Please compute 12*(3+4)"))["run"]["id"]
    await run_state(bob, run_id, {"awaiting_approval"})
    assert tools.calls == []
    assert (await bob.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})).status_code == 202
    answer = await answer_of(bob, conversation, run_id)
    assert tools.calls == [("code_exec", {"code": "print(12*(3+4))"})]
    assert answer["content"] == "The result is 84."


async def test_plan_mode_writes_a_json_plan_then_carries_it_out(stack: ChatStack, tools: FakeTools) -> None:
    carol = await stack.client("carol-offline")
    conversation = await new_conversation(carol, mode="plan")
    run_id = (await say(carol, conversation, "Search the handbook kb for vacation"))["run"]["id"]
    before = [f async for f in frames(carol, run_id, until="approval.request")]
    [plan] = [f.data for f in before if f.event == "plan"]
    assert plan["node_id"] == "approve" and plan["steps"] == [
        "Search the knowledge base handbook for vacation", "Answer: Search the handbook kb for vacation"]
    assert [f.event for f in before][-2:] == ["plan", "approval.request"]
    await run_state(carol, run_id, {"awaiting_approval"})
    assert tools.calls == []  # nothing runs before the plan is approved
    assert (await carol.post(f"/api/v1/runs/{run_id}/approval", json={"decision": "approve"})).status_code == 202
    answer = await answer_of(carol, conversation, run_id)
    assert tools.calls == [("kb_search", {"kb": "handbook", "query": "vacation", "user_id": "carol-offline"})]
    assert answer["content"] == "From the knowledge base: Staff get 25 days of vacation a year."


async def test_direct_mode_answers_without_tools(stack: ChatStack, tools: FakeTools) -> None:
    dave = await stack.client()
    conversation = await new_conversation(dave, mode="direct")
    run_id = (await say(dave, conversation, "Agentix runs graphs. Remember that. What does Agentix run?"))["run"]["id"]
    answer = await answer_of(dave, conversation, run_id)
    assert tools.calls == [] and answer["tool_events"] == []
    assert answer["content"] == "Agentix runs graphs."
