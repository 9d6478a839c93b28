"""Agentix as the model endpoint of the agent frameworks, through their real packages against a
real gateway and dispatcher (the scripted model server behind): LangChain's `ChatOpenAI` with
`bind_tools` (chat completions and its Responses API mode) and `with_structured_output`, and
the OpenAI Agents SDK — an `Agent` with a local `@function_tool` on `OpenAIResponsesModel` and on
`OpenAIChatCompletionsModel`: the tool runs in the client, and the final answer uses its result;
an agent continued by `previous_response_id` is told its instructions once (with reasoning
summaries `auto`, as the SDK's docs set them for reasoning models)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI
from openai.types.shared import Reasoning
from pydantic import BaseModel

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import ChatStack
from tests.support import openai_server as oai

set_tracing_disabled(True)  # the Agents SDK would export its traces to OpenAI


# The compatibility tests' stack (gateway, dispatcher, the scripted model), set up once per module.
srv, tools, stack, scripted = compat.srv, compat.tools, compat.stack, compat.scripted


def base_url(stack: ChatStack) -> str:
    return f"{stack.gateways[0].url}/v1"


async def key(stack: ChatStack, user: str) -> str:
    """A long-lived API key with scope `chat` (what a user gives a framework), made by the user."""
    client = await stack.client(user)
    made = await client.post("/api/v1/keys", json={"name": user, "scopes": ["chat"]})
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def offered(srv: oai.OpenAIServer, index: int = -1) -> list[str]:
    return [t["function"]["name"] for t in srv.requests()[index]["body"].get("tools") or []]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"3C in {city}"


class City(BaseModel):
    """A city and its country."""

    city: str
    country: str


@pytest.mark.parametrize("responses_api", [False, True])
async def test_langchain_bind_tools_gets_tool_calls_back(
    stack: ChatStack, scripted: oai.OpenAIServer, responses_api: bool,
) -> None:
    scripted.script([oai.reply(tool_calls=[oai.tool_call("get_weather", {"city": "Oslo"}, id="call_lc")]),
                     oai.reply("It is 3C in Oslo.")])
    model = ChatOpenAI(model="agentix-direct", base_url=base_url(stack), api_key=await key(stack, "langchain"),
                       max_retries=0, timeout=90, use_responses_api=responses_api)
    bound = model.bind_tools([get_weather])
    asked = await bound.ainvoke("Weather in Oslo?")
    assert [(c["name"], c["args"], c["id"]) for c in asked.tool_calls] == [  # type: ignore[attr-defined]
        ("get_weather", {"city": "Oslo"}, "call_lc")]
    assert offered(scripted) == ["get_weather"]
    result = get_weather.invoke(asked.tool_calls[0])  # type: ignore[attr-defined]  # a ToolMessage
    answer = await bound.ainvoke([("user", "Weather in Oslo?"), asked, result])
    assert answer.content == "It is 3C in Oslo." or answer.text == "It is 3C in Oslo."
    messages = scripted.requests()[-1]["body"]["messages"][1:]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[2]["tool_call_id"] == "call_lc" and messages[2]["content"] == "3C in Oslo"


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
async def test_langchain_with_structured_output(stack: ChatStack, scripted: oai.OpenAIServer, method: str) -> None:
    answer = {"city": "Paris", "country": "France"}
    scripted.script([oai.reply(json.dumps(answer)) if method == "json_schema" else
                     oai.reply(tool_calls=[oai.tool_call("City", answer, id="call_city")])])
    model = ChatOpenAI(model="agentix-direct", base_url=base_url(stack), api_key=await key(stack, "structured"),
                       max_retries=0, timeout=90)
    structured: Any = model.with_structured_output(City, method=method)  # type: ignore[arg-type]
    assert await structured.ainvoke("Capital of France?") == City(**answer)
    sent = scripted.requests()[-1]["body"]
    if method == "json_schema":
        assert sent["response_format"]["json_schema"]["name"] == "City"
    else:
        assert offered(scripted) == ["City"] and sent["tool_choice"]["function"]["name"] == "City"


@function_tool
def city_weather(city: str) -> str:
    """The weather in a city."""
    ran.append(city)
    return f"3C in {city}"


ran: list[str] = []


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_an_agents_sdk_agent_runs_its_function_tool_locally(
    stack: ChatStack, scripted: oai.OpenAIServer, api: str,
) -> None:
    scripted.script([oai.reply(tool_calls=[oai.tool_call("city_weather", {"city": "Oslo"}, id="call_ag")]),
                     oai.reply("It is 3C in Oslo, says the tool.")])
    client = AsyncOpenAI(base_url=base_url(stack), api_key=await key(stack, "agents-sdk"), max_retries=0, timeout=90)
    model = (OpenAIResponsesModel(model="agentix-direct", openai_client=client) if api == "responses" else
             OpenAIChatCompletionsModel(model="agentix-direct", openai_client=client))
    agent = Agent(name="Weather", instructions="Answer with the tool's result.", tools=[city_weather], model=model)
    before = len(ran)
    result = await Runner.run(agent, "Weather in Oslo?", run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "It is 3C in Oslo, says the tool."
    assert ran[before:] == ["Oslo"]  # the tool ran in the client, once
    assert offered(scripted, 0) == ["city_weather"]
    messages = scripted.requests()[-1]["body"]["messages"]
    assert messages[-1]["role"] == "tool" and messages[-1]["tool_call_id"] == "call_ag"
    assert messages[-1]["content"] == "3C in Oslo"
    await client.close()


async def test_an_agents_sdk_agent_continued_by_previous_response_id_is_told_its_instructions_once(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("First."), oai.reply("Second.")])
    client = AsyncOpenAI(base_url=base_url(stack), api_key=await key(stack, "agents-chain"), max_retries=0, timeout=90)
    # With the reasoning settings the SDK's docs show for reasoning models: summaries `auto`.
    agent = Agent(name="Chain", instructions="Be brief.", model=OpenAIResponsesModel(model="agentix-direct",
                                                                                    openai_client=client),
                  model_settings=ModelSettings(reasoning=Reasoning(effort="low", summary="auto")))
    first = await Runner.run(agent, "One?", run_config=RunConfig(tracing_disabled=True))
    second = await Runner.run(agent, "Two?", previous_response_id=first.last_response_id,
                              run_config=RunConfig(tracing_disabled=True))
    assert second.final_output == "Second."
    said = [(m["role"], m["content"]) for m in scripted.requests()[-1]["body"]["messages"][1:]]
    assert said == [("user", "One?"), ("assistant", "First."), ("system", "Be brief."), ("user", "Two?")]
    assert scripted.requests()[-1]["body"]["reasoning_effort"] == "low"
    await client.close()


async def test_a_revoked_key_is_refused_to_a_framework(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    owner = await stack.client("revoked-framework")
    made = (await owner.post("/api/v1/keys", json={"name": "gone", "scopes": ["chat"]})).json()
    model = ChatOpenAI(model="agentix-direct", base_url=base_url(stack), api_key=made["key"], max_retries=0,
                       timeout=90)
    assert (await owner.delete(f"/api/v1/keys/{made['id']}")).status_code == 200
    with pytest.raises(openai.AuthenticationError) as refused:
        await model.bind_tools([get_weather]).ainvoke("Weather in Oslo?")
    assert refused.value.code == "invalid_api_key"
    assert scripted.requests() == []
