"""The legacy function calling's turns in a chat completions history, driven by the real `openai`
SDK against a real gateway and dispatcher (the scripted model behind): an assistant's
`function_call` and the `role: function` result after it reach the model as a tool call and its
result, in order, with an id made from the call's place in the history."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import ChatStack
from tests.support import openai_server as oai

# The compatibility tests' stack (gateway, dispatcher, the scripted model), set up once per module.
srv, tools, stack, scripted, sdk = compat.srv, compat.tools, compat.stack, compat.scripted, compat.sdk

HISTORY: list[Any] = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
    {"role": "function", "name": "get_weather", "content": '{"temp": "3C"}'},
]


def _given(server: oai.OpenAIServer) -> list[dict[str, Any]]:
    """The messages the model received, after the agent's own system prompt."""
    return [{k: m.get(k) for k in ("role", "content", "tool_calls", "tool_call_id") if m.get(k) is not None}
            for m in server.requests()[-1]["body"]["messages"][1:]]


CALL = {"id": "call_fn1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}


async def test_the_function_role_reaches_the_model_as_tool_turns_in_order(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("It is 3C in Oslo."), oai.reply("Pack a coat.")])
    async with sdk(stack, "function-role") as ai:
        first = await ai.chat.completions.create(model="agentix-direct", messages=HISTORY)
        assert _given(scripted) == [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "tool_calls": [CALL]},
            {"role": "tool", "content": '{"temp": "3C"}', "tool_call_id": "call_fn1"}]
        more = [*HISTORY, {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "What should I wear?"}]
        second = await ai.chat.completions.create(model="agentix-direct", messages=more)
    assert (first.choices[0].message.content, second.choices[0].message.content) == ("It is 3C in Oslo.",
                                                                                      "Pack a coat.")
    assert [m["role"] for m in _given(scripted)] == ["user", "assistant", "tool", "assistant", "user"]
    assert _given(scripted)[1:3] == [{"role": "assistant", "tool_calls": [CALL]},
                                     {"role": "tool", "content": '{"temp": "3C"}', "tool_call_id": "call_fn1"}]


async def test_a_function_result_without_its_call_and_the_functions_parameter_are_refused(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    async with sdk(stack, "function-role-refused") as ai:
        with pytest.raises(openai.BadRequestError) as unanswered:
            await ai.chat.completions.create(model="agentix-direct", messages=[HISTORY[0], HISTORY[2]])
        with pytest.raises(openai.BadRequestError) as legacy:
            await ai.chat.completions.create(model="agentix-direct", messages=HISTORY,
                                             functions=[{"name": "get_weather", "parameters": {"type": "object"}}])
    assert unanswered.value.param == "messages[1].name"
    assert (legacy.value.param, legacy.value.code) == ("functions", "unsupported_parameter")
    assert scripted.requests() == []
