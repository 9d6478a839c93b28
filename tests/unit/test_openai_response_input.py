"""The Responses API's request as a run's prompt: items to chat turns, function tools, tool
choice and text format in the chat completions' shapes, and refusals by name."""

from __future__ import annotations

from typing import Any

import pytest

from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.response_input import ResponseRequest, prompt_of

TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": True}


def test_items_become_turns_and_a_function_output_may_be_last() -> None:
    body = ResponseRequest(model="m", instructions="Be brief.", tools=[TOOL],
                           tool_choice={"type": "function", "name": "get_weather"},
                           text={"format": {"type": "json_schema", "name": "W", "schema": {"type": "object"}}},
                           input=[{"role": "user", "content": "Weather?"},
                                  {"type": "reasoning", "id": "rs_1", "summary": []},
                                  {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": "Looking."}]},
                                  {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
                                  {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{}"},
                                  {"type": "function_call_output", "call_id": "c1", "output": "3C"},
                                  {"type": "function_call_output", "call_id": "c2", "output": "4C"}])
    prompt = prompt_of(body, earlier=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])
    assert prompt.text == ""
    assert [m["role"] for m in prompt.history] == ["user", "assistant", "system", "user", "assistant", "tool", "tool"]
    assert prompt.history[4]["content"] == "Looking." and [c["id"] for c in prompt.history[4]["tool_calls"]] == [
        "c1", "c2"]
    assert prompt.client.agent_config() == {
        "client_tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"},
                                                           "strict": True}}],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "response_format": {"type": "json_schema", "json_schema": {"name": "W", "schema": {"type": "object"}}}}


@pytest.mark.parametrize(("extra", "field"), [
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"text": {"verbosity": "loud"}}, "text.verbosity"),
    ({"text": {"stop": "x"}}, "text.stop"),
    ({"text": {"format": {"type": "grammar"}}}, "text.format.type"),
    ({"background": True, "store": False}, "background"),
    ({"input": [{"type": "computer_call", "call_id": "x"}]}, "input[0].type"),
])
def test_what_is_not_taken_is_refused_by_name(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiProblem) as refused:
        prompt_of(ResponseRequest.model_validate({"model": "m", "input": "Hi", **extra}))
    assert refused.value.errors is not None and refused.value.errors[0]["field"] == field


@pytest.mark.parametrize(("given", "expected"), [("c_1", "c_1"), ({"id": "c_1"}, "c_1"), (None, None)])
def test_a_conversation_is_its_id_or_an_object_with_it(given: Any, expected: str | None) -> None:
    body = ResponseRequest.model_validate({"model": "m", "input": "Hi", "conversation": given})
    prompt = prompt_of(body)
    assert (body.conversation_id, prompt.text, prompt.history) == (expected, "Hi", [])


@pytest.mark.parametrize(("extra", "field"), [
    ({"conversation": {"name": "x"}}, "conversation"),
    ({"conversation": "c_1", "previous_response_id": "resp_x"}, "conversation"),
    ({"conversation": "c_1", "instructions": "Be brief."}, "instructions"),
    ({"conversation": "c_1", "input": [{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Hi"}]},
     "input"),
])
def test_what_a_conversations_turn_cannot_take_is_refused_by_name(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiProblem) as refused:
        prompt_of(ResponseRequest.model_validate({"model": "m", "input": "Hi", **extra}))
    assert refused.value.errors is not None and refused.value.errors[0]["field"] == field
