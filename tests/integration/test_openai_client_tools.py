"""A client's own function tools and response format over `/v1/chat/completions`, driven by the
real `openai` SDK against a real gateway and dispatcher (NATS, the scripted model server behind):
the tools reach the model beside the assistant's own, a call of one comes back as `tool_calls`
(whole and streamed, as the SDK reassembles it) and is never run by Agentix, the tool result the
client sends back reaches the model in order, and `response_format` json_schema is sent to the
model and its answer checked (`parse()` with a pydantic model; a non-conforming answer an error)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import ChatStack
from tests.integration.test_tool_approval import CountingTools
from tests.support import openai_server as oai

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


# The compatibility tests' stack (gateway, dispatcher, the scripted model, `weather` and the
# high-risk `wipe` as the assistant's own tools), set up once per module.
srv, tools, stack, scripted, sdk = compat.srv, compat.tools, compat.stack, compat.scripted, compat.sdk


def offered(srv: oai.OpenAIServer, index: int = -1) -> list[str]:
    return [t["function"]["name"] for t in srv.requests()[index]["body"].get("tools") or []]


async def test_a_tool_round_trip_with_the_sdk(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply(tool_calls=[oai.tool_call("get_weather", {"city": "Oslo"}, id="call_1")]),
                     oai.reply("It is 3C in Oslo.")])
    question: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    async with sdk(stack, "round-trip") as ai:
        first = await ai.chat.completions.create(model="agentix-direct", messages=question, tools=[WEATHER],
                                                 tool_choice="auto", parallel_tool_calls=False, temperature=0.2,
                                                 max_completion_tokens=50)
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
            ("call_1", "get_weather", {"city": "Oslo"})]
        sent = scripted.requests()[-1]["body"]
        assert sent["tools"] == [WEATHER] and sent["tool_choice"] == "auto"
        assert (sent["parallel_tool_calls"], sent["temperature"], sent["max_tokens"]) == (False, 0.2, 50)
        # The client runs its tool and sends the result back: the last message is the tool's.
        history = [*question, choice.message.model_dump(exclude_none=True),
                   {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": "3C"}'}]
        second = await ai.chat.completions.create(model="agentix-direct", messages=history, tools=[WEATHER])
    assert second.choices[0].message.content == "It is 3C in Oslo."
    assert second.choices[0].finish_reason == "stop"
    given = scripted.requests()[-1]["body"]["messages"][1:]  # after the agent's own system prompt
    assert [m["role"] for m in given] == ["user", "assistant", "tool"]
    call = given[1]["tool_calls"][0]
    assert (call["id"], call["function"]["name"]) == ("call_1", "get_weather")
    assert given[2] == {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": "3C"}'}


async def test_streamed_tool_calls_beside_the_assistants_own_tools(
    stack: ChatStack, scripted: oai.OpenAIServer, tools: CountingTools,
) -> None:
    scripted.script([oai.reply(tool_calls=[oai.tool_call("get_weather", {"city": "Oslo"}, id="call_a"),
                                           oai.tool_call("get_weather", {"city": "Rome"}, id="call_b")])])
    before = len(tools.calls["weather"])
    async with sdk(stack, "streamed-tools") as ai:
        async with ai.chat.completions.stream(model="agentix-react", tools=[WEATHER],
                                              messages=[{"role": "user", "content": "Oslo and Rome?"}]) as events:
            kinds = [e.type async for e in events]
            final = await events.get_final_completion()
    assert "tool_calls.function.arguments.done" in kinds
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [(c.id, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []] == [
        ("call_a", {"city": "Oslo"}), ("call_b", {"city": "Rome"})]
    # Both the assistant's own tools and the client's were offered; the client's never ran here.
    assert {"weather", "get_weather"} <= set(offered(scripted))
    assert len(tools.calls["weather"]) == before and len(scripted.requests()) == 1


class City(BaseModel):
    city: str
    country: str


async def test_parse_with_a_pydantic_model(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply('{"city": "Paris", "country": "France"}')])
    async with sdk(stack, "parse-user") as ai:
        parsed = await ai.chat.completions.parse(model="agentix-direct", response_format=City,
                                                 messages=[{"role": "user", "content": "Capital of France?"}])
    assert parsed.choices[0].message.parsed == City(city="Paris", country="France")
    sent = scripted.requests()[-1]["body"]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["city", "country"]


async def test_an_answer_that_breaks_the_schema_is_an_error(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply('{"town": "Paris"}'), oai.reply('{"town": "Paris"}')])
    question = [{"role": "user", "content": "Capital of France?"}]
    async with sdk(stack, "schema-user") as ai:
        with pytest.raises(openai.InternalServerError) as whole:
            await ai.chat.completions.parse(model="agentix-direct", response_format=City, messages=question)
        stream = await ai.chat.completions.create(model="agentix-direct", messages=question, stream=True,
                                                  response_format={"type": "json_schema", "json_schema": {
                                                      "name": "City", "schema": City.model_json_schema()}})
        with pytest.raises(openai.APIError) as streamed:
            async for _ in stream:
                pass
    for raised in (whole.value, streamed.value):
        assert raised.code == "bad_output"
        assert "does not match the response format's JSON schema" in raised.message


async def test_what_cannot_take_the_clients_tools_is_refused_by_name(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    question = [{"role": "user", "content": "Hello"}]
    async with sdk(stack, "tools-refused") as ai:
        with pytest.raises(openai.BadRequestError) as conversation:
            await ai.chat.completions.create(model="agentix-react", messages=question, tools=[WEATHER],
                                             extra_headers={"X-Agentix-Conversation": "new"})
        with pytest.raises(openai.BadRequestError) as legacy:
            await ai.chat.completions.create(model="agentix-react", messages=question,
                                             functions=[WEATHER["function"]])
        with pytest.raises(openai.BadRequestError) as orphan:
            await ai.chat.completions.create(model="agentix-react", messages=[
                *question, {"role": "tool", "content": "1"}])
    assert (conversation.value.param, conversation.value.code) == ("tools", "unsupported_parameter")
    assert (legacy.value.param, legacy.value.code) == ("functions", "unsupported_parameter")
    assert orphan.value.param == "messages[1].tool_call_id"
    assert scripted.requests() == []


# ---------------------------------------------------------------------------- the Responses API

RESPONSES_WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
                     "parameters": WEATHER["function"]["parameters"], "strict": False}


async def test_a_function_call_round_trip_on_the_responses_api(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply("Let me look.", tool_calls=[oai.tool_call("get_weather", {"city": "Oslo"},
                                                                          id="call_r1")]),
                     oai.reply("It is 3C in Oslo.")])
    async with sdk(stack, "responses-tools") as ai:
        first = await ai.responses.create(model="agentix-direct", input="Weather in Oslo?", tools=[RESPONSES_WEATHER],
                                          tool_choice={"type": "function", "name": "get_weather"})
        assert [o.type for o in first.output] == ["message", "function_call"]
        call = first.output[1]
        assert (call.call_id, call.name, json.loads(call.arguments)) == (  # type: ignore[union-attr]
            "call_r1", "get_weather", {"city": "Oslo"})
        sent = scripted.requests()[-1]["body"]
        assert sent["tools"] == [{"type": "function", "function": {k: v for k, v in RESPONSES_WEATHER.items()
                                                                   if k != "type"}}]
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
        # What the SDKs send back: the input, the output items, the function's output.
        second = await ai.responses.create(model="agentix-direct", tools=[RESPONSES_WEATHER], input=[
            {"role": "user", "content": "Weather in Oslo?"}, *[o.model_dump(exclude_none=True) for o in first.output],
            {"type": "function_call_output", "call_id": "call_r1", "output": '{"temp": "3C"}'}])
        assert second.output_text == "It is 3C in Oslo."
        given = [i async for i in ai.responses.input_items.list(second.id, order="asc")]
    assert [i.type for i in given] == ["message", "message", "function_call", "function_call_output"]
    messages = scripted.requests()[-1]["body"]["messages"][1:]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["content"] == "Let me look." and messages[1]["tool_calls"][0]["id"] == "call_r1"
    assert messages[2] == {"role": "tool", "tool_call_id": "call_r1", "content": '{"temp": "3C"}'}


async def test_streamed_function_calls_on_the_responses_api(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply(tool_calls=[oai.tool_call("get_weather", {"city": "Rome"}, id="call_s1")])])
    async with sdk(stack, "responses-stream-tools") as ai:
        async with ai.responses.stream(model="agentix-react", input="Weather in Rome?",
                                       tools=[RESPONSES_WEATHER]) as events:
            seen = [e async for e in events]
            final = await events.get_final_response()
    kinds = [e.type for e in seen]
    assert kinds == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                     "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert [(o.type, o.call_id, json.loads(o.arguments)) for o in final.output] == [  # type: ignore[union-attr]
        ("function_call", "call_s1", {"city": "Rome"})]


async def test_previous_response_id_over_three_turns(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply("Hello Ada."), oai.reply("Your name is Ada."), oai.reply("You asked twice.")])
    async with sdk(stack, "responses-chain") as ai:
        one = await ai.responses.create(model="agentix-direct", input="My name is Ada.")
        two = await ai.responses.create(model="agentix-direct", input="What is my name?", previous_response_id=one.id)
        three = await ai.responses.create(model="agentix-direct", input="How often did I ask?",
                                          previous_response_id=two.id)
        assert (two.previous_response_id, three.output_text) == (one.id, "You asked twice.")
        with pytest.raises(openai.NotFoundError):
            await ai.responses.create(model="agentix-direct", input="Hi", previous_response_id="resp_nobody")
    assert sent_turns(scripted) == [
        ("user", "My name is Ada."), ("assistant", "Hello Ada."), ("user", "What is my name?"),
        ("assistant", "Your name is Ada."), ("user", "How often did I ask?")]


async def test_a_previous_responses_instructions_are_not_carried_over(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    """As OpenAI's: each response's `instructions` are its own (the Agents SDK sends them anew
    with every call), so a chain is told the latest only, and lists none as its input items."""
    scripted.script([oai.reply("Hello."), oai.reply("Bonjour."), oai.reply("Hallo.")])
    async with sdk(stack, "responses-instructions") as ai:
        one = await ai.responses.create(model="agentix-direct", input="Hi!", instructions="Answer in English.")
        two = await ai.responses.create(model="agentix-direct", input="Again?", instructions="Answer in French.",
                                        previous_response_id=one.id)
        assert sent_turns(scripted) == [("user", "Hi!"), ("assistant", "Hello."), ("system", "Answer in French."),
                                        ("user", "Again?")]
        await ai.responses.create(model="agentix-direct", input="Once more?", instructions="Answer in German.",
                                  previous_response_id=two.id)
        said = sent_turns(scripted)
        assert [text for role, text in said if role == "system"] == ["Answer in German."]
        assert [text for role, text in said if role != "system"] == ["Hi!", "Hello.", "Again?", "Bonjour.",
                                                                     "Once more?"]
        listed = await ai.responses.input_items.list(two.id, order="asc")
        assert [(i.type, i.role) for i in listed.data] == [("message", "user"), ("message", "assistant"),
                                                            ("message", "user")]


async def test_a_response_not_stored_is_answered_then_forgotten(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    """`store: false` (the Agents SDK's `ModelSettings(store=False)`, LangChain's `store=False`):
    answered, streamed or whole, then never readable again, and its input, output and events
    removed as `DELETE` removes them; the task's record stays (usage, cost)."""
    scripted.script([oai.reply("Kept to myself."), oai.reply("Streamed, then gone.", chunk_chars=4)])
    async with sdk(stack, "responses-unstored") as ai:
        whole = await ai.responses.create(model="agentix-direct", input="A secret?", store=False)
        assert (whole.status, whole.output_text) == ("completed", "Kept to myself.")
        async with ai.responses.stream(model="agentix-direct", input="Another?", store=False) as events:
            streamed = await events.get_final_response()
        assert streamed.output_text == "Streamed, then gone."
        for gone in (whole, streamed):
            await compat.assert_gone(ai, gone.id)
    native = await stack.client("responses-unstored")
    for gone in (whole, streamed):  # emptied before the client had the response's end
        run_id = gone.id.removeprefix("resp_")
        task = (await native.get(f"/api/v1/tasks/{run_id}")).json()
        assert task["status"] == "done" and task["usage"]["completion_tokens"] > 0
        assert task["output"] is None and not task["input"]
        events = await native.get(f"/api/v1/tasks/{run_id}/events")
        assert "Kept to myself" not in events.text and "Streamed, then gone" not in events.text


async def test_input_items_come_in_pages_and_what_no_route_reads_is_refused(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("Five.")])
    async with sdk(stack, "responses-pages") as ai:
        made = await ai.responses.create(model="agentix-direct", input=[
            {"role": "user", "content": "One"}, {"role": "assistant", "content": "Two"},
            {"role": "user", "content": "Three"}, {"role": "assistant", "content": "Four"},
            {"role": "user", "content": "Count on"}])
        first = await ai.responses.input_items.list(made.id, order="asc", limit=2)
        assert ([i.content[0].text for i in first.data], first.has_more) == (  # type: ignore[union-attr]
            ["One", "Two"], True)
        every = [i.content[0].text async for i in ai.responses.input_items.list(  # type: ignore[union-attr]
            made.id, order="asc", limit=2)]  # the SDK pages on with `after`
        assert every == ["One", "Two", "Three", "Four", "Count on"]
        newest = await ai.responses.input_items.list(made.id, limit=1)
        assert [i.content[0].text for i in newest.data] == ["Count on"]  # type: ignore[union-attr]
        for call, param in ((ai.responses.retrieve(made.id, include=["message.output_text.logprobs"]), "include"),
                            (ai.responses.input_items.list(made.id, include=["message.input_image.image_url"]),
                             "include"),
                            (ai.responses.retrieve(made.id, extra_query={"detail": "full"}), "detail"),
                            (ai.models.list(extra_query={"owned_by": "agentix"}), "owned_by")):
            with pytest.raises(openai.BadRequestError) as refused:
                await call
            assert refused.value.param == param


def sent_turns(srv: oai.OpenAIServer) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in srv.requests()[-1]["body"]["messages"][1:]]


async def test_text_format_json_schema_with_parse(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply('{"city": "Paris", "country": "France"}'), oai.reply('{"city": "Paris"}')])
    async with sdk(stack, "responses-parse") as ai:
        parsed = await ai.responses.parse(model="agentix-direct", input="Capital of France?", text_format=City)
        assert parsed.output_parsed == City(city="Paris", country="France")
        sent = scripted.requests()[-1]["body"]["response_format"]
        assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "City"
        broken = await ai.responses.create(model="agentix-direct", input="Capital of France?",
                                           text={"format": {"type": "json_schema", "name": "City",
                                                            "schema": City.model_json_schema()}})
    assert broken.status == "failed" and broken.error is not None and broken.error.code == "bad_output"
