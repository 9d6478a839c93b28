"""The OpenAI facade's pieces without I/O: how a run's events become deltas and an ending, the
request's prompt and history, the conversation headers, and the error shape."""

from __future__ import annotations

from typing import Any

import pytest

from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.errors import error_body, from_problem
from services.gateway.protocols.openai.request import ChatCompletionRequest, prompt_of, refuse_unsupported
from services.gateway.protocols.openai.start import Started, conversation_wish
from services.gateway.protocols.openai.translate import Translator, answer_of
from services.gateway.protocols.openai.wire import Head
from shared.contract.events import (
    ApprovalRequestEvent,
    DoneEvent,
    StatusEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
)
from shared.contract.models import Usage

RUN = "t_run"


def translator(mode: str | None = "react", conversation: str | None = None) -> Translator:
    return Translator.for_mode(Started(RUN, conversation), mode)


def test_tokens_are_content_and_thinking_and_a_plan_are_reasoning() -> None:
    t = translator("plan")
    assert t.feed(TokenEvent(task_id=RUN, node_id="plan", text='{"steps"')).wire() == {"reasoning_content": '{"steps"'}
    assert t.feed(ThinkingEvent(task_id=RUN, node_id="ans", text="hmm")).wire() == {"reasoning_content": "hmm"}
    assert t.feed(TokenEvent(task_id=RUN, node_id="ans", text="Hi")).wire() == {"content": "Hi"}
    assert t.feed(StatusEvent(task_id=RUN, status="running")) is None and t.ending is None
    t.feed(DoneEvent(task_id=RUN, status="done", output={"answer": "Hi"}, usage=Usage(prompt_tokens=3)))
    assert t.ending is not None and t.ending.finish_reason == "stop" and t.ending.tail is None
    assert t.text == "Hi" and t.ending.usage == Usage(prompt_tokens=3)


def test_an_answer_that_was_not_streamed_is_said_at_the_end() -> None:
    t = translator(None)
    t.feed(DoneEvent(task_id=RUN, status="done", output={"out": {"n": 2}}))
    assert t.ending is not None and t.text == '{"n": 2}'
    assert answer_of({"a": 1, "b": 2}) == '{"a": 1, "b": 2}' and answer_of(None) is None


def test_an_exhausted_budget_ends_with_length() -> None:
    t = translator()
    t.feed(TokenEvent(task_id=RUN, node_id="ans", text="Half"))
    t.feed(DoneEvent(task_id=RUN, status="budget_exceeded", error="budget"))
    assert t.ending is not None and t.ending.finish_reason == "length" and t.text == "Half"


@pytest.mark.parametrize(("status", "code", "error", "http", "message"), [
    ("failed", "rate_limited", "429 retry after 7", 429, "The model is rate limited — retry in 7 s."),
    ("timeout", None, "deadline", 504, "The model timed out."),
    ("failed", "stream_broken", "broke", 500, "The model's answer broke off mid-stream."),
    ("cancelled", None, "cancelled by u1", 409, "Run t_run was cancelled: cancelled by u1"),
])
def test_a_failure_is_an_error_with_the_chats_sentence(status: str, code: str | None, error: str, http: int,
                                                        message: str) -> None:
    t = translator()
    t.feed(StatusEvent(task_id=RUN, status=status, error=error, code=code))
    t.feed(DoneEvent(task_id=RUN, status=status, error=error))
    assert t.ending is not None and t.ending.finish_reason is None and t.ending.status == http
    assert t.ending.error is not None and t.ending.error["error"]["message"] == message


@pytest.mark.parametrize(("conversation", "route"), [("c_1", "/api/v1/runs/t_run/approval"),
                                                     (None, "/api/v1/tasks/t_run/approval")])
def test_a_run_waiting_for_approval_ends_naming_it(conversation: str | None, route: str) -> None:
    t = translator("plan", conversation)
    t.feed(ApprovalRequestEvent(task_id=RUN, node_id="approve", message="Approve this plan?"))
    t.feed(StatusEvent(task_id=RUN, status="waiting", usage=Usage(completion_tokens=4)))
    assert t.ending is not None and t.ending.finish_reason == "stop"
    assert t.ending.tail is not None and f"Run {RUN} waits for a human approval (Approve this plan?)" in t.ending.tail
    assert f"POST {route}" in t.ending.tail and t.ending.usage == Usage(completion_tokens=4)


def test_the_prompt_is_the_last_user_message_and_the_history_before_it() -> None:
    body = ChatCompletionRequest.model_validate({"model": "m", "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "One"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "result", "tool_call_id": "x"},
        {"role": "user", "content": [{"type": "text", "text": "Two"}, {"type": "image_url", "image_url": {
            "url": "https://example.com/a.png", "detail": "low"}}, {"type": "text", "text": " parts"}]},
    ]})
    refuse_unsupported(body)  # a user's image is taken (whether the model takes it is the gateway's to say)
    prompt = prompt_of(body)
    assert prompt.text == "Two parts"
    assert (prompt.image_parts, prompt.parts) == (["messages[4].content[1]"], [
        {"type": "text", "text": "Two"}, {"type": "image_url", "image_url": {"url": "https://example.com/a.png",
                                                                             "detail": "low"}},
        {"type": "text", "text": " parts"}])
    assert prompt.turns() == ("", [*prompt.history, {"role": "user", "content": prompt.parts}])
    # The client's tool turns reach the model in order, as sent.
    assert prompt.history == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "One"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "result", "tool_call_id": "x"}]
    assert prompt.strings() == ["Two parts", "One"]  # what the user wrote: not the client's instructions
    for bad in ({"type": "image_url", "image_url": {}}, {"type": "input_audio", "input_audio": {}}):
        with pytest.raises(ApiProblem) as refused:
            wrong = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Hi"}, bad]}]})
            refuse_unsupported(wrong)
            prompt_of(wrong)
        assert refused.value.errors is not None
        assert refused.value.errors[0]["field"] in ("messages[0].content[1]", "messages[0].content")
    with pytest.raises(ApiProblem):
        prompt_of(ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": " "}]}))


def test_the_conversation_headers() -> None:
    assert conversation_wish(None, None) is None
    assert conversation_wish(" c_1 ", None) == "c_1"
    assert conversation_wish(None, "New") == "new"
    for bad in (("c_1", "new"), (None, "old")):
        with pytest.raises(ApiProblem) as raised:
            conversation_wish(*bad)
        assert raised.value.status == 400


def test_errors_have_openai_shape() -> None:
    assert error_body("nope", 404, "model_not_found") == {
        "error": {"message": "nope", "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
    assert error_body("slow down", 429)["error"]["type"] == "rate_limit_error"
    assert error_body("down", 503)["error"]["type"] == "server_error"
    problem = ApiProblem(400, "Bad Request", "last message", errors=[{"code": "invalid_value", "field": "messages"}])
    assert from_problem(problem)["error"] == {"message": "last message", "type": "invalid_request_error",
                                              "param": "messages", "code": "invalid_value"}


def test_chunks_and_the_usage_chunk() -> None:
    head = Head(id="chatcmpl-x", created=1, model="agentix-react")
    chunk = head.chunk({"content": "a"}, "stop")
    assert chunk["object"] == "chat.completion.chunk" and chunk["choices"][0]["finish_reason"] == "stop"
    usage = head.usage_chunk(Usage(prompt_tokens=2, completion_tokens=3))
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


def test_a_conversation_may_end_with_tool_results_and_the_clients_choices_go_to_the_agent() -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    body = ChatCompletionRequest.model_validate({"model": "m", "tools": tools, "tool_choice": "required",
                                                 "response_format": {"type": "json_object"}, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "content": "3C", "tool_call_id": "c1"}]})
    refuse_unsupported(body)
    prompt = prompt_of(body)
    assert prompt.text == "" and [m["role"] for m in prompt.history] == ["user", "assistant", "tool"]
    assert prompt.strings() == ["Weather?"]
    assert prompt.client.agent_config() == {"client_tools": tools, "tool_choice": "required",
                                            "response_format": {"type": "json_object"}}


@pytest.mark.parametrize(("extra", "field"), [
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"tools": [{"type": "custom", "custom": {"name": "f"}}]}, "tools[0].type"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"response_format": {"type": "grammar"}}, "response_format.type"),
    ({"function_call": "auto"}, "function_call"),
])
def test_what_is_not_taken_is_refused_by_name(extra: dict[str, Any], field: str) -> None:
    body = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "Hi"}],
                                                 **extra})
    with pytest.raises(ApiProblem) as refused:
        refuse_unsupported(body)
    assert refused.value.errors is not None and refused.value.errors[0]["field"] == field


LEGACY: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Oslo and Rome?"},
    {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
    {"role": "function", "name": "weather", "content": "3C"},
    {"role": "assistant", "content": "Now Rome.", "function_call": {"name": "weather", "arguments": '{"c": "Rome"}'}},
    {"role": "function", "name": "weather", "content": "20C"},
]


def test_the_legacy_function_turns_are_tool_turns_with_ids_made_from_their_place() -> None:
    body = ChatCompletionRequest.model_validate({"model": "m", "messages": LEGACY})
    refuse_unsupported(body)
    prompt = prompt_of(body)
    assert prompt.text == ""  # it ends with a function's result: no new words
    assert prompt.history == [
        {"role": "user", "content": "Weather in Oslo and Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_fn1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "content": "3C", "tool_call_id": "call_fn1"},
        {"role": "assistant", "content": "Now Rome.", "tool_calls": [
            {"id": "call_fn3", "type": "function", "function": {"name": "weather", "arguments": '{"c": "Rome"}'}}]},
        {"role": "tool", "content": "20C", "tool_call_id": "call_fn3"}]
    assert prompt_of(body).history == prompt.history  # the same history, the same ids
    assert prompt.strings() == ["Weather in Oslo and Rome?"]  # the guardrail reads the user's words only


def test_a_function_result_without_its_call_is_refused_naming_it() -> None:
    body = ChatCompletionRequest.model_validate({"model": "m", "messages": [
        {"role": "user", "content": "Hi"}, {"role": "function", "name": "weather", "content": "3C"}]})
    with pytest.raises(ApiProblem) as refused:
        prompt_of(body)
    assert refused.value.errors is not None and refused.value.errors[0]["field"] == "messages[1].name"


def test_a_client_tool_call_is_a_tool_calls_delta_and_ends_the_answer() -> None:
    t = Translator(Started(run_id=RUN, conversation_id=None))
    delta = t.feed(ToolCallEvent(task_id=RUN, call_id="c1", tool="get_weather", args={"city": "Oslo"}, client=True))
    assert delta is not None and delta.wire() == {"tool_calls": [{
        "index": 0, "id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}
    assert t.feed(ToolCallEvent(task_id=RUN, call_id="s1", tool="weather", args={})) is None  # the server's own
    t.feed(DoneEvent(task_id=RUN, status="done", output={"answer": ""}))
    assert t.ending is not None and t.ending.finish_reason == "tool_calls" and t.ending.tail is None
    message = Head(id="chatcmpl-x", created=1, model="m").completion(t, t.ending)["choices"][0]["message"]
    assert message["content"] is None and message["tool_calls"][0]["id"] == "c1"
