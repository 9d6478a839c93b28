"""A client's sampling choices and the other top-level parameters over `/v1`, driven by the real
`openai` SDK against a real gateway and dispatcher (NATS, Postgres, the scripted OpenAI-protocol
model behind): what is set reaches the model's request body (every turn of a ReAct loop), what
is not set is not sent, an unknown parameter is a 400 naming it before any model is asked, and a
response can be deleted (a 404 from then on, for every way of reading it)."""

from __future__ import annotations

from typing import Any

import nats.js.errors
import openai
import pytest

from tests.integration import test_openai_compat as compat
from tests.integration.chat_support import ChatStack
from tests.support import openai_server as oai

# The compatibility tests' stack (gateway, dispatcher, the scripted model), set up once per module.
srv, tools, stack, scripted = compat.srv, compat.tools, compat.stack, compat.scripted
sdk, native = compat.sdk, compat.native

HELLO: list[Any] = [{"role": "user", "content": "Hello"}]
CHAT_SAMPLING: dict[str, Any] = {
    "top_p": 0.8, "stop": ["END", "STOP"], "seed": 11, "presence_penalty": 0.4, "frequency_penalty": -0.3,
    "logit_bias": {"1734": -100}, "user": "end-user-1", "reasoning_effort": "low", "verbosity": "low",
    "safety_identifier": "hashed-user-1"}
SAMPLING_KEYS = {*CHAT_SAMPLING, "temperature", "max_tokens"}


async def test_the_chat_sampling_choices_reach_the_model_and_only_those_set(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("Hi."), oai.reply("Hi again.")])
    async with sdk(stack, "sampling-user") as ai:
        answer = await ai.chat.completions.create(
            model="agentix-direct", messages=HELLO, temperature=0.3, max_completion_tokens=40, n=1,
            metadata={"trace": "t-1"}, store=False, service_tier="auto", prompt_cache_key="pk-1",
            prediction={"type": "content", "content": "Hi."}, **CHAT_SAMPLING)
        assert answer.choices[0].message.content == "Hi."
        sent = scripted.requests()[-1]["body"]
        assert {k: sent.get(k) for k in SAMPLING_KEYS} == {**CHAT_SAMPLING, "temperature": 0.3, "max_tokens": 40}
        # The no-ops go nowhere: the model is asked for the answer only.
        assert not {"metadata", "store", "service_tier", "prompt_cache_key", "prediction", "n"} & set(sent)

        await ai.chat.completions.create(model="agentix-direct", messages=HELLO)
    assert not SAMPLING_KEYS & set(scripted.requests()[-1]["body"])  # nothing set, nothing sent


async def test_every_turn_of_a_react_loop_takes_them(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"})]),
                     oai.reply("It is 3C in Oslo.")])
    async with sdk(stack, "sampling-react") as ai:
        chunks = [c async for c in await ai.chat.completions.create(
            model="agentix-react", stream=True, seed=5, stop="END", top_p=0.5,
            messages=[{"role": "user", "content": "Weather in Oslo?"}])]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "It is 3C in Oslo."
    turns = scripted.requests()
    assert len(turns) == 2
    assert [(t["body"]["seed"], t["body"]["stop"], t["body"]["top_p"]) for t in turns] == [(5, "END", 0.5)] * 2


async def test_the_responses_sampling_choices_reach_the_model_and_are_echoed(
    stack: ChatStack, scripted: oai.OpenAIServer,
) -> None:
    scripted.script([oai.reply("Sure.")])
    async with sdk(stack, "responses-sampling") as ai:
        made = await ai.responses.create(
            model="agentix-direct", input="Hello", temperature=0.2, top_p=0.7, max_output_tokens=64,
            reasoning={"effort": "medium"}, user="end-user-2", safety_identifier="hashed-user-2",
            text={"verbosity": "high"}, truncation="disabled", service_tier="default", metadata={"trace": "t-2"},
            store=True, prompt_cache_key="pk-2")
    sent = scripted.requests()[-1]["body"]
    assert {k: sent.get(k) for k in ("temperature", "top_p", "max_tokens", "reasoning_effort", "user",
                                     "safety_identifier", "verbosity")} == {
        "temperature": 0.2, "top_p": 0.7, "max_tokens": 64, "reasoning_effort": "medium", "user": "end-user-2",
        "safety_identifier": "hashed-user-2", "verbosity": "high"}
    assert (made.output_text, made.top_p, made.user, made.metadata) == ("Sure.", 0.7, "end-user-2", {"trace": "t-2"})
    assert made.reasoning is not None and made.reasoning.effort == "medium"


@pytest.mark.parametrize(("param", "code", "extra"), [
    ("best_of", "unknown_parameter", {"best_of": 3}),
    ("top_k", "unknown_parameter", {"top_k": 40}),
    ("top_p", "invalid_value", {"top_p": 1.5}),
    ("stop", "invalid_value", {"stop": ["a", "b", "c", "d", "e"]}),
    ("store", "unsupported_parameter", {"store": True}),
    ("service_tier", "unsupported_parameter", {"service_tier": "flex"}),
])
async def test_a_chat_parameter_unknown_or_out_of_range_is_a_400_naming_it(
    stack: ChatStack, scripted: oai.OpenAIServer, param: str, code: str, extra: dict[str, Any],
) -> None:
    async with sdk(stack, "sampling-refused") as ai:
        with pytest.raises(openai.BadRequestError) as refused:
            await ai.chat.completions.create(model="agentix-direct", messages=HELLO, extra_body=extra)
    assert (refused.value.param, refused.value.code) == (param, code)
    assert param in str(refused.value)
    assert scripted.requests() == []


@pytest.mark.parametrize(("param", "code", "extra"), [
    ("frequency_penalty", "unknown_parameter", {"frequency_penalty": 0.5}),  # the chat's, not the Responses API's
    ("reasoning.effort", "invalid_value", {"reasoning": {"effort": "maximal"}}),
    ("truncation", "unsupported_parameter", {"truncation": "auto"}),
])
async def test_a_responses_parameter_unknown_or_not_honoured_is_a_400_naming_it(
    stack: ChatStack, scripted: oai.OpenAIServer, param: str, code: str, extra: dict[str, Any],
) -> None:
    async with sdk(stack, "responses-sampling-refused") as ai:
        with pytest.raises(openai.BadRequestError) as refused:
            await ai.responses.create(model="agentix-direct", input="Hello", extra_body=extra)
    assert (refused.value.param, refused.value.code) == (param, code)
    assert scripted.requests() == []


async def test_a_conversation_refuses_sampling_it_cannot_apply(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    async with sdk(stack, "sampling-conversation", **{"X-Agentix-Conversation": "new"}) as ai:
        with pytest.raises(openai.BadRequestError) as refused:
            await ai.chat.completions.create(model="agentix-direct", messages=HELLO, seed=1)
    assert (refused.value.param, refused.value.code) == ("seed", "unsupported_parameter")
    assert scripted.requests() == []


async def test_a_deleted_response_is_gone_but_its_record_stays(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply("Keep this secret.", usage={"prompt_tokens": 7, "completion_tokens": 3})])
    async with sdk(stack, "responses-deleter") as ai:
        made = await ai.responses.create(model="agentix-direct", input="Remember the code 4321.")
        async with sdk(stack, "someone-else-deleting") as other:
            with pytest.raises(openai.NotFoundError):
                await other.responses.delete(made.id)
        raw = await ai.responses.with_raw_response.delete(made.id)
        assert raw.http_response.json() == {"id": made.id, "object": "response.deleted", "deleted": True}
        await compat.assert_gone(ai, made.id)
        with pytest.raises(openai.NotFoundError):
            await ai.responses.delete(made.id)
    assert len(scripted.requests()) == 1  # the continuation was refused before any model call
    run_id = made.id.removeprefix("resp_")
    api = await native(stack, "responses-deleter")
    task = (await api.get(f"/api/v1/tasks/{run_id}")).json()
    assert (task["status"], task["input"], task["output"]) == ("done", {}, None)
    assert task["usage"]["prompt_tokens"] == 7  # what it cost is still counted
    assert stack.gateways[0].app is not None
    bus = stack.gateways[0].app.state.bus
    with pytest.raises(nats.js.errors.NotFoundError):  # the run's events, the answer among them, are gone
        await bus.js.get_last_msg(bus.names.events_stream, bus.subjects.events_all(run_id))


async def test_a_response_still_going_is_not_deleted(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.hang("A long", seconds=600)])
    async with sdk(stack, "responses-busy") as ai:
        raw = await ai.responses.with_raw_response.create(model="agentix-direct", stream=True, input="Talk long")
        going = f"resp_{raw.headers['X-Agentix-Run-Id']}"
        events = raw.parse()
        async for event in events:
            if event.type == "response.output_text.delta":
                break
        with pytest.raises(openai.ConflictError):
            await ai.responses.delete(going)
        assert (await ai.responses.cancel(going)).status == "cancelled"
        await events.close()


async def test_a_conversations_run_is_no_response_to_delete(stack: ChatStack, scripted: oai.OpenAIServer) -> None:
    scripted.script([oai.reply("Noted.")])
    async with sdk(stack, "conversation-keeper", **{"X-Agentix-Conversation": "new"}) as ai:
        raw = await ai.chat.completions.with_raw_response.create(model="agentix-direct", messages=HELLO)
        run_id = raw.headers["X-Agentix-Run-Id"]
        assert raw.parse().choices[0].message.content == "Noted."
        with pytest.raises(openai.NotFoundError):
            await ai.responses.delete(f"resp_{run_id}")
    api = await native(stack, "conversation-keeper")
    task = (await api.get(f"/api/v1/tasks/{run_id}")).json()
    assert task["input"]["text"] == "Hello"  # left as it was
