"""Tool descriptors → OpenAI function specs without the injected parameters."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.react import ReactAgent, function_names, function_spec
from services.dispatcher.llm.api import AgentTurn, LLMRequest, LLMResult
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply
from tests.unit.engine_fakes import FakeLLM, tool_call


def test_injected_parameters_are_removed_from_schema_and_required() -> None:
    tool = ToolDescriptor(
        name="kb_search",
        title="KB search",
        description="Search a knowledge base.",
        service="go",
        inject=["user_id", "kb"],
        input_schema={
            "title": "Args",
            "type": "object",
            "required": ["query", "kb", "user_id"],
            "properties": {
                "query": {"type": "string"},
                "kb": {"type": "string"},
                "user_id": {"type": "string"},
                "top_k": {"type": "integer"},
            },
        },
    )
    spec = function_spec(tool)
    assert spec["type"] == "function" and spec["function"]["name"] == "kb_search"
    params = spec["function"]["parameters"]
    assert set(params["properties"]) == {"query", "top_k"} and params["required"] == ["query"]
    assert "title" not in params
    assert set(tool.input_schema["properties"]) == {"query", "kb", "user_id", "top_k"}  # not mutated


def test_empty_schema_and_all_injected() -> None:
    bare = function_spec(ToolDescriptor(name="now", title="Now", description="", service="py"))
    assert bare["function"]["parameters"] == {"type": "object", "properties": {}}
    assert bare["function"]["description"] == "Now"
    only = function_spec(
        ToolDescriptor(
            name="me",
            title="Me",
            description="d",
            service="go",
            inject=["user_id"],
            input_schema={"type": "object", "required": ["user_id"], "properties": {"user_id": {"type": "string"}}},
        )
    )
    assert only["function"]["parameters"] == {"type": "object", "properties": {}}


def test_tools_go_by_function_names_the_openai_protocol_accepts() -> None:
    # MCP tools are named <server>.<tool>; OpenAI function names allow only [A-Za-z0-9_-].
    tools = [ToolDescriptor(name=n, title=n, description="", service="mcp") for n in
             ("calc.shout", "calc_shout", "calc shout", "kb_search")]
    named = function_names(tools)
    assert list(named) == ["calc_shout", "calc_shout_2", "calc_shout_3", "kb_search"]
    assert [t.name for t in named.values()] == ["calc.shout", "calc_shout", "calc shout", "kb_search"]
    assert function_spec(tools[0], "calc_shout")["function"]["name"] == "calc_shout"


async def test_a_call_by_function_name_reaches_the_tool_by_its_own_name() -> None:
    calls: list[str] = []

    class Caller:
        async def call(self, tool: str, args: dict[str, Any], meta: ToolMeta | None, *,
                       timeout_s: float | None = None) -> ToolReply:
            calls.append(tool)
            return ToolReply.success({"text": args["text"].upper()})

    answers = iter([tool_call("calc_shout", text="hi"), LLMResult(text="HI it is", model="fake")])
    llm = FakeLLM(script=lambda request: next(answers))
    tool = ToolDescriptor(name="calc.shout", title="Shout", description="", service="mcp",
                          input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    turn = AgentTurn(node_id="a", request=LLMRequest(messages=[{"role": "user", "content": "shout hi"}]),
                     tools=[tool], meta=ToolMeta(task_id="t"), inject={})
    result = await ReactAgent()(llm, turn, caller=Caller(), emit=emit, budget=None)
    assert calls == ["calc.shout"] and result.text == "HI it is"
    assert [e.tool for e in events if e.type == "tool.call"] == ["calc.shout"]
    assert llm.requests[0].tools is not None and llm.requests[0].tools[0]["function"]["name"] == "calc_shout"
