"""The model endpoint's own pieces: the proxy it takes from the environment, a complete (not
streamed) answer read as dicts, a streamed one read in paced rounds (each read's pieces merged
for the sink, the body's end not held), and the errors an HTTP status or a transport failure becomes (the real server's
answers and failures are covered by the integration tests)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from services.dispatcher.llm.api import LLMRequest
from services.dispatcher.llm.endpoint import Generation, OpenAIEndpoint, _env_proxy
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


@pytest.mark.parametrize(("base_url", "field"), [
    (None, "max_completion_tokens"),  # no base URL: OpenAI's own API
    ("https://api.openai.com/v1", "max_completion_tokens"),
    ("http://127.0.0.1:11434/v1", "max_tokens"),  # Ollama, vLLM and the like
    ("https://api.deepseek.com/v1", "max_tokens"),
])
def test_the_answer_limit_goes_in_the_field_the_server_takes(base_url: str | None, field: str) -> None:
    endpoint = OpenAIEndpoint(ModelConfig(id="a", name="a", base_url=base_url, model="m"), "k")
    body = endpoint._body(LLMRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=50))
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert body[field] == 50 and other not in body
    unbounded = endpoint._body(LLMRequest(messages=[{"role": "user", "content": "hi"}]))
    assert "max_tokens" not in unbounded and "max_completion_tokens" not in unbounded


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


class ScriptedBody:
    """A streamed response's body as `OpenAIEndpoint._consume` reads it: one `readany` per
    scripted read, b"" once they are used up (the body has ended: `on_eof` callbacks run), and
    `iter_any` for what follows `[DONE]`."""

    def __init__(self, reads: list[bytes], log: list[str]) -> None:
        self.reads = list(reads)
        self.log = log
        self.ended: list[Callable[[], None]] = []
        self.eof = False

    def on_eof(self, callback: Callable[[], None]) -> None:
        self.ended.append(callback)

    def is_eof(self) -> bool:
        return self.eof

    def end(self) -> None:
        self.eof = True
        for callback in self.ended:
            callback()

    async def readany(self) -> bytes:
        self.log.append("read")
        return self.reads.pop(0) if self.reads else b""

    async def iter_any(self) -> AsyncIterator[bytes]:
        while self.reads:
            yield self.reads.pop(0)


class Pace:
    """Holds each read from the second on for `wait_s`, and logs when it is asked."""

    def __init__(self, log: list[str], wait_s: float = 0.001) -> None:
        self.log = log
        self.wait_s = wait_s
        self.asked = 0
        self.holding = asyncio.Event()  # a read has been told to wait

    def read_wait(self) -> float:
        self.asked += 1
        self.log.append("pace")
        if self.asked == 1:
            return 0.0
        self.holding.set()
        return self.wait_s


def sse(*chunks: dict[str, Any] | str) -> bytes:
    return b"".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n".encode() for c in chunks)


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


async def consume(reads: list[bytes], pace: Pace | None = None, body: ScriptedBody | None = None
                  ) -> tuple[Generation, list[tuple[str, str, Any]], list[str]]:
    log = pace.log if pace is not None else []
    got: list[tuple[str, str, Any]] = []
    body = body or ScriptedBody(reads, log)

    async def sink(kind: str, text: str, call: tuple[str, str] | None) -> None:
        log.append(f"sink {kind}")
        got.append((kind, text, call))

    endpoint = OpenAIEndpoint(ModelConfig(id="a", name="a", base_url="http://127.0.0.1:1/v1", model="m"), "k")
    answer = await endpoint._consume(SimpleNamespace(content=body), sink, pace)  # type: ignore[arg-type]
    return answer, got, log


async def test_each_read_hands_the_sink_its_pieces_merged_in_order() -> None:
    reads = [sse(delta(role="assistant", content="")),
             sse(delta(content="Hel"), delta(content="lo"), delta(reasoning_content="hm"), delta(content="!"),
                 delta(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "kb_search", "arguments": "{\"q\""}}]),
                 delta(tool_calls=[{"index": 0, "function": {"arguments": ": 1}"}}]),
                 delta(tool_calls=[{"index": 1, "id": "c2", "function": {"name": "kb_get", "arguments": "{}"}}])),
             sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                 {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}, "[DONE]"),
             b"after the end marker"]
    answer, got, log = await consume(reads)
    assert got == [("token", "Hello", None), ("thinking", "hm", None), ("token", "!", None),
                   ("tool_input", "{\"q\": 1}", ("c1", "kb_search")), ("tool_input", "{}", ("c2", "kb_get"))]
    assert (answer.text, answer.thinking, answer.usage, answer.finish_reason) == ("Hello!", "hm", (5, 4), "tool_calls")
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("c1", "kb_search", {"q": 1}),
                                                                       ("c2", "kb_get", {})]
    assert log.count("read") == 3  # what follows [DONE] is drained through iter_any, not read as chunks


async def test_a_paced_read_waits_for_the_pace_and_takes_what_came_in_one_read() -> None:
    reads = [sse(delta(content="a")), sse(delta(content="b"), delta(content="c"), delta(content="d")), sse("[DONE]")]
    log: list[str] = []
    answer, got, _ = await consume(reads, Pace(log))
    assert answer.text == "abcd" and got == [("token", "a", None), ("token", "bcd", None)]
    # The first read is not held; each next one asks the pace first (and waits as it says).
    assert log == ["pace", "read", "sink token", "pace", "read", "sink token", "pace", "read"]


async def test_the_end_of_the_body_ends_a_paced_wait() -> None:
    """The answer's end is not held for the interval: the body's end wakes the wait."""
    log: list[str] = []
    body = ScriptedBody([sse(delta(content="a")), sse(delta(content="b"), "[DONE]")], log)
    pace = Pace(log, wait_s=3600.0)
    reading = asyncio.create_task(consume([], pace, body))
    async with asyncio.timeout(30):
        await pace.holding.wait()  # the first read is done; the second waits its hour
        for _ in range(5):  # loop turns in which a read that is not held would have happened
            await asyncio.sleep(0)
        assert log.count("read") == 1
        body.end()
        answer, got, _ = await reading
    assert answer.text == "ab" and got == [("token", "a", None), ("token", "b", None)]


async def test_a_stream_that_ends_without_done_keeps_what_it_said() -> None:
    answer, got, _ = await consume([sse(delta(content="cut")) + b'data: {"choices": [{"delta": {"content": " off"}}]}'],
                                   Pace([]))
    assert answer.text == "cut off" and got == [("token", "cut", None), ("token", " off", None)]
