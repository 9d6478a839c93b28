"""A client's sampling choices over `/v1`: checked with OpenAI's ranges (a bad value a 400 naming
the request's parameter), carried to the answering agent's `sampling` config and on to the
model's request body (only the ones set; the request's beat the operator's defaults); the
parameters Agentix does not know, or cannot honour, refused by name."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.dispatcher.llm.api import LLMRequest
from services.dispatcher.llm.endpoint import OfflineEndpoint, OpenAIEndpoint
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.request import ChatCompletionRequest, prompt_of, refuse_unsupported
from services.gateway.protocols.openai.response_input import ResponseRequest
from services.gateway.protocols.openai.response_input import prompt_of as response_prompt_of
from shared.contract.dsl import AgentConfig
from shared.contract.models import ModelConfig, ModelParams
from shared.contract.sampling import Sampling

HELLO = [{"role": "user", "content": "Hello"}]


def chat(**extra: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"model": "agentix-direct", "messages": HELLO, **extra})


def refused_field(call: Any) -> tuple[str, str]:
    with pytest.raises(ApiProblem) as refused:
        call()
    assert refused.value.status == 400
    first = (refused.value.errors or [{}])[0]
    assert first["field"] in refused.value.detail  # the message names it too
    return first["field"], first["code"]


def test_the_chat_sampling_choices_reach_the_agent_config() -> None:
    body = chat(temperature=0.3, top_p=0.9, max_tokens=10, max_completion_tokens=40, stop=["END", "STOP"], seed=7,
                presence_penalty=0.5, frequency_penalty=-0.5, logit_bias={"50256": -100}, user="u-1",
                reasoning_effort="low", safety_identifier="hashed-1", verbosity="high", metadata={"k": "v"},
                store=False, service_tier="auto", prompt_cache_key="pk",
                prediction={"type": "content", "content": "x"}, stream_options={"include_obfuscation": False})
    refuse_unsupported(body)
    config = prompt_of(body).client.agent_config()
    assert config == {"temperature": 0.3, "max_tokens": 40, "sampling": {
        "top_p": 0.9, "stop": ["END", "STOP"], "seed": 7, "presence_penalty": 0.5, "frequency_penalty": -0.5,
        "logit_bias": {"50256": -100}, "reasoning_effort": "low", "verbosity": "high", "user": "u-1",
        "safety_identifier": "hashed-1"}}
    # The agent node takes it as its own (the DSL checks it again).
    agent = AgentConfig.model_validate({"prompt": "{{ input.text }}", **config})
    assert agent.sampling is not None and agent.sampling.seed == 7
    assert "sampling" not in prompt_of(chat()).client.agent_config()  # none set: none sent


def test_a_zero_is_a_choice_not_nothing() -> None:
    config = prompt_of(chat(seed=0, presence_penalty=0, top_p=0)).client.agent_config()
    assert config["sampling"] == {"seed": 0, "presence_penalty": 0, "top_p": 0}


@pytest.mark.parametrize(("extra", "field"), [
    ({"top_p": 1.5}, "top_p"),
    ({"presence_penalty": -2.5}, "presence_penalty"),
    ({"frequency_penalty": 3}, "frequency_penalty"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"stop": [""]}, "stop"),
    ({"logit_bias": {"hello": 1}}, "logit_bias"),
    ({"logit_bias": {"42": 101}}, "logit_bias"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"verbosity": "loud"}, "verbosity"),
    ({"safety_identifier": "x" * 65}, "safety_identifier"),
])
def test_a_value_out_of_openais_range_is_a_400_naming_it(extra: dict[str, Any], field: str) -> None:
    assert refused_field(lambda: prompt_of(chat(**extra))) == (field, "invalid_value")


@pytest.mark.parametrize(("extra", "field", "code"), [
    ({"best_of": 2}, "best_of", "unknown_parameter"),
    ({"temprature": 0.2}, "temprature", "unknown_parameter"),
    ({"store": True}, "store", "unsupported_parameter"),
    ({"service_tier": "flex"}, "service_tier", "unsupported_parameter"),
    ({"web_search_options": {"search_context_size": "low"}}, "web_search_options", "unsupported_parameter"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "invalid_value"),
    ({"metadata": {"k": "v" * 513}}, "metadata.k", "invalid_value"),
    ({"prediction": {"type": "diff"}}, "prediction.type", "invalid_value"),
    ({"n": 2}, "n", "unsupported_parameter"),
])
def test_chat_parameters_agentix_does_not_know_or_honour_are_refused_by_name(
        extra: dict[str, Any], field: str, code: str) -> None:
    assert refused_field(lambda: refuse_unsupported(chat(**extra))) == (field, code)


def test_an_unknown_stream_option_is_refused() -> None:
    with pytest.raises(ValidationError, match="include_everything"):
        chat(stream=True, stream_options={"include_usage": True, "include_everything": True})


def response(**extra: Any) -> ResponseRequest:
    return ResponseRequest.model_validate({"model": "agentix-direct", "input": "Hello", **extra})


def test_the_responses_sampling_choices_reach_the_agent_config() -> None:
    body = response(temperature=0.1, top_p=0.5, max_output_tokens=64, reasoning={"effort": "high", "summary": "auto"},
                    user="u-2",
                    safety_identifier="s-2", text={"verbosity": "low"}, truncation="disabled", service_tier="default",
                    metadata={"trace": "t1"}, store=True, prompt_cache_key="pk")
    assert response_prompt_of(body).client.agent_config() == {"temperature": 0.1, "max_tokens": 64, "sampling": {
        "top_p": 0.5, "reasoning_effort": "high", "verbosity": "low", "user": "u-2", "safety_identifier": "s-2"}}


@pytest.mark.parametrize(("extra", "field", "code"), [
    ({"reasoning": {"effort": "high", "summary": "detailed"}}, "reasoning.summary", "unsupported_parameter"),
    ({"reasoning": {"generate_summary": "concise"}}, "reasoning.generate_summary", "unsupported_parameter"),
    ({"reasoning": {"effort": "maximal"}}, "reasoning.effort", "invalid_value"),
    ({"reasoning": {"budget": 100}}, "reasoning.budget", "unknown_parameter"),
    ({"store": False, "background": True}, "background", "unsupported_parameter"),
    ({"truncation": "auto"}, "truncation", "unsupported_parameter"),
    ({"service_tier": "priority"}, "service_tier", "unsupported_parameter"),
    ({"top_p": 2}, "top_p", "invalid_value"),
    ({"max_tool_calls": 3}, "max_tool_calls", "unsupported_parameter"),
    ({"frequency_penalty": 0.5}, "frequency_penalty", "unknown_parameter"),  # chat's, not the Responses API's
    ({"stream_options": {"include_usage": True}}, "stream_options.include_usage", "unknown_parameter"),
])
def test_responses_parameters_agentix_does_not_know_or_honour_are_refused_by_name(
        extra: dict[str, Any], field: str, code: str) -> None:
    assert refused_field(lambda: response_prompt_of(response(**extra))) == (field, code)


def endpoint(**params: Any) -> OpenAIEndpoint:
    return OpenAIEndpoint(ModelConfig(id="m1", name="m", model="gpt-test", base_url="http://127.0.0.1:9/v1",
                                      params=ModelParams(**params)), None)


def test_the_request_body_carries_the_choices_set_over_the_operators_defaults() -> None:
    request = LLMRequest(messages=HELLO, stream=False, temperature=0.2,
                         sampling=Sampling(top_p=0.9, seed=3, stop="END", reasoning_effort="minimal"))
    body = endpoint(top_p=0.5, temperature=1.0, extra={"seed": 1, "vendor_flag": True})._body(request)
    assert {k: body[k] for k in ("temperature", "top_p", "seed", "stop", "reasoning_effort", "vendor_flag")} == {
        "temperature": 0.2, "top_p": 0.9, "seed": 3, "stop": "END", "reasoning_effort": "minimal",
        "vendor_flag": True}
    plain = endpoint()._body(LLMRequest(messages=HELLO, stream=False))
    assert set(plain) == {"model", "messages"}  # nothing set, nothing sent


async def test_the_offline_model_honours_stop_only() -> None:
    offline = OfflineEndpoint(ModelConfig(id="o", name="offline", provider="offline", model="offline"))
    whole = (await offline.generate(LLMRequest(messages=HELLO, stream=False), None)).text
    cut_at = whole.split()[1]
    cut = await offline.generate(LLMRequest(messages=HELLO, stream=False,
                                            sampling=Sampling(stop=["never-said", cut_at], seed=1)), None)
    assert cut.text == whole[:whole.index(cut_at)] and cut.text != whole
