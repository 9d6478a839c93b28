"""One model endpoint, one attempt: the chat-completions protocol against any OpenAI-compatible
`base_url` (over aiohttp), or the offline model. Retries, failover, budgets and redaction live in
`failover.py`; this module only speaks the protocol and raises `AttemptError`s."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import aiohttp

from services.dispatcher.llm.api import LLMRequest, ToolCallRequest
from services.dispatcher.llm.chunks import ChatChunks, drain, reasoning_of, usage_of
from services.dispatcher.llm.errors import MODEL_EXCEPTIONS, AttemptError, error_body, status_error, transport_error
from services.dispatcher.llm.offline import offline_answer, stream_pieces
from services.dispatcher.llm.offline_tools import tool_call as offline_tool_call
from shared.contract.models import ModelConfig


class ReadPace(Protocol):
    """When a streamed answer's next read is due (`deltas.DeltaStream`): what is read sooner
    would only wait there."""

    def read_wait(self) -> float: ...


class RawSink(Protocol):
    """Where an attempt streams what the model writes: answer tokens, reasoning, and the arguments
    of a tool call as they come (`tool_input`, with `call` = (call id, function name))."""

    async def __call__(self, kind: Literal["token", "thinking", "tool_input"], text: str,
                       call: tuple[str, str] | None, /) -> None: ...


@dataclass
class Generation:
    """What one successful attempt produced (text unredacted; usage None when not reported)."""

    text: str
    thinking: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens)
    finish_reason: str | None = None


class Endpoint(Protocol):
    config: ModelConfig

    def params(self, request: LLMRequest) -> dict[str, Any]: ...

    async def generate(self, request: LLMRequest, sink: RawSink | None, *, pace: ReadPace | None = None
                       ) -> Generation: ...

    async def aclose(self) -> None: ...


def merged_params(cfg: ModelConfig, request: LLMRequest) -> dict[str, Any]:
    p = cfg.params
    out: dict[str, Any] = {
        "temperature": request.temperature if request.temperature is not None else p.temperature,
        "max_tokens": request.max_tokens if request.max_tokens is not None else p.max_tokens,
        "top_p": p.top_p,
    }
    out = {k: v for k, v in out.items() if v is not None}
    # The request's own choices (a client's `top_p` beats the operator's default).
    out.update(request.sampling.body() if request.sampling is not None else {})
    if p.extra:
        out["extra"] = p.extra
    return out


def _cut_at_stop(text: str, stop: str | list[str] | None) -> str:
    """The text up to the first stop sequence (OpenAI's `stop`: the sequence is not included)."""
    cuts = [text.find(s) for s in ([stop] if isinstance(stop, str) else stop or [])]
    found = [c for c in cuts if c >= 0]
    return text[:min(found)] if found else text


def _tool_call(index: int, call_id: str | None, name: str, raw: str) -> ToolCallRequest:
    try:
        args = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolCallRequest(call_id or f"call_{index}", name, {}, f"arguments are not valid JSON: {exc}")
    if not isinstance(args, dict):
        return ToolCallRequest(call_id or f"call_{index}", name, {}, "arguments must be a JSON object")
    return ToolCallRequest(call_id or f"call_{index}", name, args)


def _env_proxy(url: str) -> str | None:
    """The proxy that HTTP(S)_PROXY and NO_PROXY name for `url`, as the openai client honoured
    them. Read once per endpoint: aiohttp's `trust_env` reads them, and ~/.netrc, on every
    request (a tenth of the dispatcher's CPU under load)."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme)


def _object(value: Any) -> dict[str, Any]:
    """A JSON object of the answer, or {} where the server sent something else."""
    return value if isinstance(value, dict) else {}


# Where a model config without a `base_url` is sent (the OpenAI API, as the `openai` client does).
DEFAULT_BASE_URL = "https://api.openai.com/v1"
USER_AGENT = "agentix-dispatcher"
MAX_CONNECTIONS = 1000
# OpenAI's own API refuses `max_tokens` for its reasoning models (o-series, gpt-5: "use
# 'max_completion_tokens' instead") and takes `max_completion_tokens` for every chat model;
# servers that speak the protocol (vLLM, Ollama, llama.cpp, most hosted ones) know `max_tokens`.
OPENAI_HOST = "api.openai.com"


def answer_limit_field(url: str) -> str:
    """The body field that bounds an answer's tokens at `url` (DSL.md, "An agent's sampling")."""
    host = urllib.parse.urlsplit(url).hostname or ""
    return "max_completion_tokens" if host == OPENAI_HOST else "max_tokens"


class OpenAIEndpoint:
    """The chat-completions protocol over one aiohttp session per endpoint (its connections are
    kept alive for the next call).

    Why aiohttp and not the `openai` client: under load the SDK's request layer and its HTTP
    stack (httpx2, httpcore2, h11 over anyio: a chain of async generators per network read, and a
    streamed answer is one read per token) were over half of the dispatcher's CPU; aiohttp parses
    HTTP in C and hands the body over in one layer. The protocol itself is small: a JSON POST,
    a JSON answer or an SSE stream (`chunks`), and errors as HTTP statuses with an OpenAI error
    body (`errors.status_error`)."""

    def __init__(self, cfg: ModelConfig, api_key: str | None) -> None:
        self.config = cfg
        timeout = cfg.params.timeout_s
        self.timeout_s = timeout
        self.url = (cfg.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        self._limit_field = answer_limit_field(self.url)
        self.headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if api_key:  # local servers (vLLM, Ollama) need none
            self.headers["Authorization"] = f"Bearer {api_key}"
        # `timeout_s` bounds the wait for the answer to start and every gap in a stream, not the
        # whole answer (a long answer that keeps streaming is not a timeout).
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(10.0, timeout), sock_read=timeout)
        self._proxy = _env_proxy(self.url)
        self._session: aiohttp.ClientSession | None = None

    def params(self, request: LLMRequest) -> dict[str, Any]:
        return merged_params(self.config, request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        # Made on first use: a session belongs to the event loop it was made on.
        if self._session is None or self._session.closed:
            # As many connections as the openai client allowed (aiohttp's default of 100 would queue
            # a wide map).
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS),
                                                  timeout=self._timeout)
        return self._session

    def _body(self, request: LLMRequest) -> dict[str, Any]:
        params = self.params(request)
        extra = params.pop("extra", None)
        if "max_tokens" in params:
            params[self._limit_field] = params.pop("max_tokens")
        body: dict[str, Any] = {"model": self.config.model, "messages": request.messages, **params}
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.response_format is not None:
            body["response_format"] = request.response_format
        elif request.json_output:
            body["response_format"] = {"type": "json_object"}
        if request.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if extra:  # provider-specific fields go into the body as they are, under the request's own
            chosen = request.sampling.body() if request.sampling is not None else {}
            body.update({k: v for k, v in extra.items() if k not in chosen})
        return body

    async def generate(self, request: LLMRequest, sink: RawSink | None, *, pace: ReadPace | None = None
                       ) -> Generation:
        """One attempt. A streamed answer with a `sink` is read when `pace` says (`_consume`)."""
        name = self.config.name
        try:
            response = await self._http().post(self.url, data=json.dumps(self._body(request)).encode(),
                                               headers=self.headers, proxy=self._proxy)
        except MODEL_EXCEPTIONS as exc:
            raise transport_error(exc, name, self.timeout_s, answering=False) from exc
        try:
            if response.status >= 400:
                raise status_error(response.status, response.headers, await error_body(response), name)
            if not request.stream:
                return self._complete(await self._read_json(response))
            return await self._consume(response, sink, pace if sink is not None else None)
        finally:
            response.release()

    async def _read_json(self, response: aiohttp.ClientResponse) -> Any:
        try:
            return json.loads(await response.read())
        except MODEL_EXCEPTIONS as exc:
            raise transport_error(exc, self.config.name, self.timeout_s, answering=True) from exc

    def _complete(self, data: Any) -> Generation:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise AttemptError("stream_broken", f"model {self.config.name!r} returned no choices")
        choice = choices[0]
        msg = _object(choice.get("message"))
        calls = []
        for i, item in enumerate(msg.get("tool_calls") or ()):
            call = _object(item)
            function = _object(call.get("function"))
            name, arguments = str(function.get("name") or ""), function.get("arguments") or ""
            calls.append(_tool_call(i, call.get("id"), name, arguments))
        return Generation(msg.get("content") or "", reasoning_of(msg) or "", calls, usage_of(data),
                          choice.get("finish_reason"))

    async def _consume(self, response: aiohttp.ClientResponse, sink: RawSink | None,
                       pace: ReadPace | None) -> Generation:
        """Read the stream, each read's chunks at once, handing the sink what each read added.

        With `pace` a read waits until what it would hand the sink can go out (`ReadPace`): the
        model's chunks that come meanwhile are buffered and taken in one read, so a model that
        sends a chunk every 15 ms wakes the dispatcher once per token interval (`deltas.py`)
        instead of once per chunk. The first read after a quiet spell is taken as soon as it
        comes, and so is the body's end."""
        answer = _Answer()
        chunks = ChatChunks(self.config.name)
        content = response.content
        paced = _PacedReads(content, pace) if pace is not None else None
        while not chunks.done:
            try:
                read = await (paced.read() if paced is not None else content.readany())
            except MODEL_EXCEPTIONS as exc:  # only the read is classified, not the sink
                raise transport_error(exc, self.config.name, self.timeout_s, answering=True) from exc
            pieces = answer.take(chunks.feed(read) if read else chunks.end())
            if sink is not None:
                for kind, text, call in pieces:
                    await sink(kind, text, call)
            if chunks.failure is not None:  # after what came before it
                if isinstance(chunks.failure, MODEL_EXCEPTIONS):
                    raise transport_error(chunks.failure, self.config.name, self.timeout_s,
                                          answering=True) from chunks.failure
                raise chunks.failure
            if not read:  # the body ended without `[DONE]`
                break
        if chunks.done:
            await drain(content.iter_any())
        return answer.generation()


Piece = tuple[Literal["token", "thinking", "tool_input"], str, tuple[str, str] | None]


class _Answer:
    """What a streamed answer said, from its chunks as they are read."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: tuple[int, int] | None = None
        self.finish: str | None = None

    def take(self, chunks: list[dict[str, Any]]) -> list[Piece]:
        """Take a read's chunks; what they add for the sink, in order, the adjacent pieces of a
        kind (of one tool call) merged into one."""
        pieces: list[Piece] = []

        def add(piece: Piece) -> None:
            last = pieces[-1] if pieces else None
            if last is not None and last[0] == piece[0] and last[2] == piece[2]:
                pieces[-1] = (last[0], last[1] + piece[1], last[2])
            else:
                pieces.append(piece)

        for chunk in chunks:
            self.usage = usage_of(chunk) or self.usage
            choices = chunk.get("choices")
            if not choices or not isinstance(choices, list):
                continue
            choice = choices[0]
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            reasoning = reasoning_of(delta)
            if reasoning:
                self.thinking.append(reasoning)
                add(("thinking", reasoning, None))
            content = delta.get("content")
            if content:
                self.text.append(content)
                add(("token", content, None))
            for tc in delta.get("tool_calls") or ():
                index = tc.get("index") or 0
                slot = self.calls.setdefault(index, {"id": None, "name": "", "args": []})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                function = tc.get("function")
                if isinstance(function, dict):
                    if function.get("name") and not slot["name"]:
                        slot["name"] = function["name"]
                    arguments = function.get("arguments")
                    if arguments:
                        slot["args"].append(arguments)
                        add(("tool_input", arguments, (slot["id"] or f"call_{index}", slot["name"])))
        return pieces

    def generation(self) -> Generation:
        tool_calls = [_tool_call(i, s["id"], s["name"], "".join(s["args"])) for i, s in sorted(self.calls.items())]
        return Generation("".join(self.text), "".join(self.thinking), tool_calls, self.usage, self.finish)


class _PacedReads:
    """A response's reads, each held until `pace` says what it reads can go out, or until the
    body has ended (the end of an answer is not held). Meanwhile the connection buffers the
    chunks that come, nobody waits on them, and the next read takes them all: one wake-up per
    interval, not one per chunk."""

    def __init__(self, content: aiohttp.StreamReader, pace: ReadPace) -> None:
        self.pace = pace
        self.content = content
        self._waiter: asyncio.Future[None] | None = None
        content.on_eof(self._wake)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def read(self) -> bytes:
        wait = self.pace.read_wait()
        if wait > 0 and not self.content.is_eof():
            # A timer and a future, not a sleep: the body's end wakes it early.
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            timer = loop.call_later(wait, self._wake)
            try:
                await self._waiter
            finally:
                timer.cancel()
                self._waiter = None
        return await self.content.readany()


class OfflineEndpoint:
    """The offline model behind the same interface (no usage reported: it is estimated). It has
    no sampling: of the request's choices it honours `sampling.stop` only (docs/DSL.md)."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.config = cfg

    def params(self, request: LLMRequest) -> dict[str, Any]:
        return {}

    async def aclose(self) -> None:
        return None

    async def generate(self, request: LLMRequest, sink: RawSink | None, *, pace: ReadPace | None = None
                       ) -> Generation:
        call = offline_tool_call(request.messages, request.tools)
        if call is not None:
            call_id, name, args = call
            if request.stream and sink is not None:
                for piece in stream_pieces(json.dumps(args, ensure_ascii=False)):
                    await sink("tool_input", piece, (call_id, name))
            return Generation(text="", tool_calls=[ToolCallRequest(call_id, name, args)], finish_reason="tool_calls")
        text = offline_answer(request.messages, request.json_output)
        if request.sampling is not None:
            text = _cut_at_stop(text, request.sampling.stop)
        if request.stream and sink is not None:
            for piece in stream_pieces(text):
                await sink("token", piece, None)
                await asyncio.sleep(0)  # a stream, not a burst: let other nodes run
        return Generation(text=text, finish_reason="stop")
