"""The model endpoint's own pieces: the proxy it takes from the environment, a complete (not
streamed) answer read as dicts, and the errors an HTTP status or a transport failure becomes
(the real server's answers and failures are covered by the integration tests)."""

from __future__ import annotations

import aiohttp
import pytest

from services.dispatcher.llm.endpoint import OpenAIEndpoint, _env_proxy
from services.dispatcher.llm.errors import status_error, transport_error
from shared.contract.models import ModelConfig


def test_the_proxy_comes_from_the_environment_once_and_no_proxy_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1,models.internal")
    assert _env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.internal:3128"
    assert _env_proxy("http://127.0.0.1:8000/v1/chat/completions") is None
    assert _env_proxy("https://models.internal/v1/chat/completions") is None
    assert _env_proxy("http://plain.example/v1/chat/completions") is None  # no HTTP_PROXY set
    endpoint = OpenAIEndpoint(ModelConfig(id="a", name="a", base_url="https://api.openai.com/v1/", model="m"), None)
    assert endpoint.url == "https://api.openai.com/v1/chat/completions" and endpoint._proxy == "http://proxy.internal:3128"
    assert "Authorization" not in endpoint.headers  # no key, no header (a local server needs none)


def test_a_complete_answer_is_read_from_its_json() -> None:
    endpoint = OpenAIEndpoint(ModelConfig(id="a", name="a", base_url="http://127.0.0.1:1/v1", model="m"), "k")
    answer = endpoint._complete({
        "choices": [{"finish_reason": "tool_calls", "message": {
            "content": "thinking done", "reasoning_content": "why",
            "tool_calls": [{"id": "c1", "function": {"name": "kb_search", "arguments": "{\"q\": \"x\"}"}},
                           {"id": "c2", "function": {"name": "broken", "arguments": "{"}}]}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    })  # fmt: skip
    assert (answer.text, answer.thinking, answer.usage, answer.finish_reason) == ("thinking done", "why", (7, 3),
                                                                                  "tool_calls")
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("c1", "kb_search", {"q": "x"}),
                                                                       ("c2", "broken", {})]
    assert "not valid JSON" in (answer.tool_calls[1].arguments_error or "")
    with pytest.raises(Exception, match="returned no choices"):
        endpoint._complete({"choices": []})


@pytest.mark.parametrize(
    ("status", "body", "code", "words"),
    [(429, '{"error": {"message": "slow down"}}', "rate_limited", ["HTTP 429", "slow down", "retry after 2 s"]),
     (429, '{"error": {"message": "pay", "code": "insufficient_quota"}}', "rate_limited", ["quota exhausted"]),
     (401, '{"error": {"message": "bad key"}}', "auth", ["authentication failed", "401", "bad key"]),
     (404, '{"error": {"message": "no such model"}}', "model_not_found", ["HTTP 404", "no such model"]),
     (400, '{"error": {"message": "too long", "code": "context_length_exceeded"}}', "context_too_long", ["context"]),
     (503, "<html>upstream down</html>", "unavailable", ["HTTP 503", "upstream down"]),
     (400, '{"error": "unsupported parameter: top_k"}', "bad_request", ["HTTP 400", "top_k"])],
)
def test_an_http_status_becomes_its_error(status: int, body: str, code: str, words: list[str]) -> None:
    error = status_error(status, {"retry-after": "2"}, body, "m")
    assert error.code == code
    for word in [*words, "'m'"]:
        assert word in error.message


def test_a_transport_failure_says_whether_the_answer_had_begun() -> None:
    timeout = aiohttp.ServerTimeoutError("Timeout on reading data from socket")
    before, during = (transport_error(timeout, "m", 0.3, answering=a).message for a in (False, True))
    assert before == "model 'm' timed out (no response within 0.3s)"
    assert during == "model 'm' timed out (no data within 0.3s)"
    cut = aiohttp.ClientPayloadError("Response payload is not completed")
    assert transport_error(cut, "m", 1, answering=True).message.startswith("model 'm': connection failed")
    refused = aiohttp.ServerDisconnectedError()
    assert "is unreachable" in transport_error(refused, "m", 1, answering=False).message
    assert all(e.retryable for e in (transport_error(x, "m", 1, answering=True) for x in (timeout, cut, refused)))
