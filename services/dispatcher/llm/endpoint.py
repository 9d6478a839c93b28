"""One model endpoint, one attempt: the `openai` async client against any OpenAI-compatible
`base_url`, or the offline model. Retries, failover, budgets and redaction live in
`failover.py`; this module only speaks the protocol and raises `AttemptError`s."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx2
import openai

from services.dispatcher.llm.api import LLMRequest, ToolCallRequest
from services.dispatcher.llm.chunks import chat_chunks, reasoning_of, usage_of
from services.dispatcher.llm.errors import MODEL_EXCEPTIONS, AttemptError, classify
from services.dispatcher.llm.offline import offline_answer, stream_pieces
from services.dispatcher.llm.offline_tools import tool_call as offline_tool_call
from shared.contract.models import ModelConfig


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

    async def generate(self, request: LLMRequest, sink: RawSink | None) -> Generation: ...

    async def aclose(self) -> None: ...


def merged_params(cfg: ModelConfig, request: LLMRequest) -> dict[str, Any]:
    p = cfg.params
    out: dict[str, Any] = {
        "temperature": request.temperature if request.temperature is not None else p.temperature,
        "max_tokens": request.max_tokens if request.max_tokens is not None else p.max_tokens,
        "top_p": p.top_p,
    }
    out = {k: v for k, v in out.items() if v is not None}
    if p.extra:
        out["extra"] = p.extra
    return out


def _tool_call(index: int, call_id: str | None, name: str, raw: str) -> ToolCallRequest:
    try:
        args = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolCallRequest(call_id or f"call_{index}", name, {}, f"arguments are not valid JSON: {exc}")
    if not isinstance(args, dict):
        return ToolCallRequest(call_id or f"call_{index}", name, {}, "arguments must be a JSON object")
    return ToolCallRequest(call_id or f"call_{index}", name, args)


def _reasoning(obj: Any) -> str | None:
    # Not fields of the openai types: DeepSeek/vLLM/OpenRouter extras land in `model_extra`.
    return reasoning_of(obj.model_extra) if obj.model_extra else None


class OpenAIEndpoint:
    def __init__(self, cfg: ModelConfig, api_key: str | None) -> None:
        self.config = cfg
        timeout = cfg.params.timeout_s
        self.timeout_s = timeout
        self.client = openai.AsyncOpenAI(
            base_url=cfg.base_url,
            # Local servers (vLLM, Ollama) need no key, but the client insists on one.
            api_key=api_key or "no-key",
            max_retries=0,  # retries are ours: they must honour breakers and failover
            timeout=openai.Timeout(timeout, connect=min(10.0, timeout)),
        )

    def params(self, request: LLMRequest) -> dict[str, Any]:
        return merged_params(self.config, request)

    async def aclose(self) -> None:
        await self.client.close()

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        params = self.params(request)
        extra = params.pop("extra", None)
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": request.messages, **params}
        if request.tools:
            kwargs["tools"] = request.tools
        if request.json_output:
            kwargs["response_format"] = {"type": "json_object"}
        if extra:
            kwargs["extra_body"] = extra
        if request.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    async def generate(self, request: LLMRequest, sink: RawSink | None) -> Generation:
        kwargs = self._kwargs(request)
        if not request.stream:
            try:
                response = await self.client.chat.completions.create(**kwargs)
            except MODEL_EXCEPTIONS as exc:
                raise classify(exc, self.config.name, self.timeout_s) from exc
            return self._parse_complete(response)
        # The SDK's passthrough POST (its documented road to a raw response): the body is already
        # in the API's shape, so the typed `create`'s walk over every message is skipped; auth,
        # headers, timeouts and status errors stay the SDK's. Chunks are read as dicts (`chunks`).
        body = {k: v for k, v in kwargs.items() if k != "extra_body"} | kwargs.get("extra_body", {})
        try:
            response = await self.client.post("/chat/completions", body=body, cast_to=httpx2.Response, stream=True)
        except MODEL_EXCEPTIONS as exc:
            raise classify(exc, self.config.name, self.timeout_s) from exc
        try:
            return await self._consume(response.aiter_bytes(), sink)
        finally:
            await response.aclose()

    def _parse_complete(self, response: Any) -> Generation:
        if not getattr(response, "choices", None):
            raise AttemptError("stream_broken", f"model {self.config.name!r} returned no choices")
        choice = response.choices[0]
        msg = choice.message
        calls = [
            _tool_call(i, tc.id, tc.function.name, tc.function.arguments or "")
            for i, tc in enumerate(msg.tool_calls or [])
        ]
        usage = (response.usage.prompt_tokens, response.usage.completion_tokens) if response.usage else None
        return Generation(msg.content or "", _reasoning(msg) or "", calls, usage, choice.finish_reason)

    async def _consume(self, body: AsyncIterator[bytes], sink: RawSink | None) -> Generation:
        text: list[str] = []
        thinking: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: tuple[int, int] | None = None
        finish: str | None = None
        chunks = chat_chunks(body, self.config.name)
        while True:
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            except MODEL_EXCEPTIONS as exc:  # only the read is classified, not the sink
                raise classify(exc, self.config.name, self.timeout_s) from exc
            usage = usage_of(chunk) or usage
            choices = chunk.get("choices")
            if not choices or not isinstance(choices, list):
                continue
            choice = choices[0]
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            reasoning = reasoning_of(delta)
            if reasoning:
                thinking.append(reasoning)
                if sink:
                    await sink("thinking", reasoning, None)
            content = delta.get("content")
            if content:
                text.append(content)
                if sink:
                    await sink("token", content, None)
            for tc in delta.get("tool_calls") or ():
                index = tc.get("index") or 0
                slot = calls.setdefault(index, {"id": None, "name": "", "args": []})
                if tc.get("id"):
                    slot["id"] = tc["id"]
                function = tc.get("function")
                if isinstance(function, dict):
                    if function.get("name") and not slot["name"]:
                        slot["name"] = function["name"]
                    arguments = function.get("arguments")
                    if arguments:
                        slot["args"].append(arguments)
                        if sink:
                            await sink("tool_input", arguments, (slot["id"] or f"call_{index}", slot["name"]))
        tool_calls = [_tool_call(i, s["id"], s["name"], "".join(s["args"])) for i, s in sorted(calls.items())]
        return Generation("".join(text), "".join(thinking), tool_calls, usage, finish)


class OfflineEndpoint:
    """The offline model behind the same interface (no usage reported: it is estimated)."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.config = cfg

    def params(self, request: LLMRequest) -> dict[str, Any]:
        return {}

    async def aclose(self) -> None:
        return None

    async def generate(self, request: LLMRequest, sink: RawSink | None) -> Generation:
        call = offline_tool_call(request.messages, request.tools)
        if call is not None:
            call_id, name, args = call
            if request.stream and sink is not None:
                for piece in stream_pieces(json.dumps(args, ensure_ascii=False)):
                    await sink("tool_input", piece, (call_id, name))
            return Generation(text="", tool_calls=[ToolCallRequest(call_id, name, args)], finish_reason="tool_calls")
        text = offline_answer(request.messages, request.json_output)
        if request.stream and sink is not None:
            for piece in stream_pieces(text):
                await sink("token", piece, None)
                await asyncio.sleep(0)  # a stream, not a burst: let other nodes run
        return Generation(text=text, finish_reason="stop")
