"""An agent's caller-side tools and response format (what an OpenAI client's `tools`,
`tool_choice` and `response_format` become): offered to the model, never run here, a call of one
ends the node with `tool.call` events marked `client`; a `json_schema` answer must conform."""

from __future__ import annotations

import itertools
from typing import Any

from services.dispatcher.llm.api import LLMRequest, LLMResult
from tests.unit.engine_fakes import Harness, graph, node, tool_call

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": {
    "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}},
    "additionalProperties": False}}}


def line(agent: dict[str, Any]) -> dict[str, Any]:
    nodes = [node("in", "input"), agent, node("out", "output", value="{{ x }}")]
    return graph(nodes, list(itertools.pairwise([n["id"] for n in nodes])))


async def test_a_call_of_a_client_tool_ends_the_node_without_running_it() -> None:
    doc = line(node("x", "agent", prompt="Weather in Oslo?", client_tools=[WEATHER], tool_choice="required"))
    h = Harness(doc)
    h.llm.script = lambda request: tool_call("get_weather", city="Oslo")
    outcome = await h.run()
    assert outcome.status == "done"
    sent = h.llm.requests[0]
    assert (sent.tools, sent.tool_choice) == ([WEATHER], "required")
    calls = h.of("tool.call", "x")
    assert [(c.tool, c.args, c.client) for c in calls] == [("get_weather", {"city": "Oslo"}, True)]
    assert h.of("tool.result") == [] and len(h.llm.requests) == 1  # nothing ran, no second turn


async def test_tool_turns_in_the_history_reach_the_model_and_a_tool_result_may_be_last() -> None:
    turns = [{"role": "user", "content": "Weather in Oslo?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
             {"role": "tool", "content": "3C", "tool_call_id": "c1"}]
    doc = line(node("x", "agent", history="{{ input.history }}", prompt="{{ in.text }}", client_tools=[WEATHER]))
    h = Harness(doc, input={"text": "", "history": turns})
    h.llm.script = lambda request: "It is 3C."
    outcome = await h.run()
    assert outcome.status == "done" and outcome.output == {"out": "It is 3C."}
    assert h.llm.requests[0].messages == turns  # no empty user message after the tool result


def _answer(text: str) -> Any:
    def script(request: LLMRequest) -> LLMResult:
        return LLMResult(text=text, model="fake")
    return script


async def test_a_json_schema_answer_must_conform() -> None:
    doc = line(node("x", "agent", prompt="Capital of France?", response_format=SCHEMA))
    good = Harness(doc)
    good.llm.script = _answer('{"city": "Paris"}')
    assert (await good.run()).status == "done"
    assert good.llm.requests[0].response_format == SCHEMA
    for text, said in (('{"town": "Paris"}', "city"), ("Paris", "not valid JSON")):
        bad = Harness(doc)
        bad.llm.script = _answer(text)
        outcome = await bad.run()
        assert (outcome.status, outcome.code) == ("failed", "bad_output"), text
        assert said in (outcome.error or "")


async def test_a_json_object_answer_must_be_an_object() -> None:
    h = Harness(line(node("x", "agent", prompt="q", response_format={"type": "json_object"})))
    h.llm.script = _answer("[1, 2]")
    outcome = await h.run()
    assert (outcome.status, outcome.code) == ("failed", "bad_output")
