"""OpenAI's chat completion objects as JSON: a streamed chunk, the usage chunk, the whole
completion, and SSE framing (`data: …` lines, `data: [DONE]` last)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from services.gateway.protocols.openai.translate import Delta, Ending, Translator
from shared.contract.models import Usage

DONE: Final = b"data: [DONE]\n\n"


def usage_object(usage: Usage | None) -> dict[str, int]:
    prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


@dataclass(frozen=True)
class Head:
    """What every object of one completion repeats."""

    id: str
    created: int
    model: str

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

    def delta(self, delta: Delta) -> bytes:
        return sse(self.chunk(delta.wire()))

    def usage_chunk(self, usage: Usage | None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": None, "choices": [], "usage": usage_object(usage)}

    def completion(self, translator: Translator, ending: Ending) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": translator.text, "refusal": None}
        if translator.tool_calls:
            message["tool_calls"] = translator.tool_calls
            message["content"] = translator.text or None
        if translator.reasoning:
            message["reasoning_content"] = "".join(translator.reasoning)
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": ending.finish_reason}],
                "usage": usage_object(ending.usage)}
