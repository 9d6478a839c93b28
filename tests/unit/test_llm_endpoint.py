"""The model endpoint's own pieces: the proxy it takes from the environment, a complete (not
streamed) answer read as dicts, a streamed one read in paced rounds (each read's pieces merged
for the sink), and the errors an HTTP status or a transport failure becomes (the real server's
answers and failures are covered by the integration tests)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

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
    scripted read (b"" at the end), and `iter_any` for what follows `[DONE]`."""

    def __init__(self, reads: list[bytes], log: list[str]) -> None:
        self.reads = list(reads)
        self.log = log

    async def readany(self) -> bytes:
        self.log.append("read")
        return self.reads.pop(0) if self.reads else b""

    async def iter_any(self) -> AsyncIterator[bytes]:
        while self.reads:
            yield self.reads.pop(0)


class ScriptedTransport:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.log.append("pause")
        self.reading = False

    def resume_reading(self) -> None:
        self.log.append("resume")
        self.reading = True


class Pace:
    """Asks each read to wait (a tiny while) from the second read on, and logs when it is asked."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.asked = 0

    def read_wait(self) -> float:
        self.asked += 1
        self.log.append("pace")
        return 0.001 if self.asked > 1 else 0.0


def sse(*chunks: dict[str, Any] | str) -> bytes:
    return b"".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n".encode() for c in chunks)


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


async def consume(reads: list[bytes], *, pace: bool) -> tuple[Generation, list[tuple[str, str, Any]], list[str]]:
    log: list[str] = []
    got: list[tuple[str, str, Any]] = []

    async def sink(kind: str, text: str, call: tuple[str, str] | None) -> None:
        log.append(f"sink {kind}")
        got.append((kind, text, call))

    response = SimpleNamespace(content=ScriptedBody(reads, log),
                               connection=SimpleNamespace(transport=ScriptedTransport(log)))
    endpoint = OpenAIEndpoint(ModelConfig(id="a", name="a", base_url="http://127.0.0.1:1/v1", model="m"), "k")
    answer = await endpoint._consume(response, sink, Pace(log) if pace else None)  # type: ignore[arg-type]
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
    answer, got, log = await consume(reads, pace=False)
    assert got == [("token", "Hello", None), ("thinking", "hm", None), ("token", "!", None),
                   ("tool_input", "{\"q\": 1}", ("c1", "kb_search")), ("tool_input", "{}", ("c2", "kb_get"))]
    assert (answer.text, answer.thinking, answer.usage, answer.finish_reason) == ("Hello!", "hm", (5, 4), "tool_calls")
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [("c1", "kb_search", {"q": 1}),
                                                                       ("c2", "kb_get", {})]
    assert log.count("read") == 3  # what follows [DONE] is drained through iter_any, not read as chunks


async def test_a_paced_read_waits_with_the_socket_paused_and_takes_what_came_in_one_read() -> None:
    reads = [sse(delta(content="a")), sse(delta(content="b"), delta(content="c"), delta(content="d")), sse("[DONE]")]
    answer, got, log = await consume(reads, pace=True)
    assert answer.text == "abcd" and got == [("token", "a", None), ("token", "bcd", None)]
    # The first read is not held; the next ones wait for the pace with the transport paused, and
    # the reading resumes before the read.
    assert log == ["pace", "read", "sink token", "pace", "pause", "resume", "read", "sink token",
                   "pace", "pause", "resume", "read"]


async def test_a_stream_that_ends_without_done_keeps_what_it_said() -> None:
    answer, got, _ = await consume([sse(delta(content="cut")) + b'data: {"choices": [{"delta": {"content": " off"}}]}'],
                                   pace=True)
    assert answer.text == "cut off" and got == [("token", "cut", None), ("token", " off", None)]
