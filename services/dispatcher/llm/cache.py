"""Output cache for non-streaming generations: Redis when configured (shared by replicas),
an in-process LRU otherwise. Key = model + params + tools + messages (+ JSON mode)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from typing import Any, Protocol

from services.dispatcher.llm.api import LLMRequest, LLMResult, ToolCallRequest
from shared.contract.models import ModelConfig, Usage

log = logging.getLogger("agentix.llm.cache")
DEFAULT_TTL_S = 24 * 3600


class OutputCache(Protocol):
    async def get(self, key: str) -> LLMResult | None: ...

    async def put(self, key: str, result: LLMResult) -> None: ...

    async def aclose(self) -> None: ...


def cache_key(cfg: ModelConfig, request: LLMRequest, params: dict[str, Any]) -> str:
    material = {
        "model": [cfg.name, cfg.provider, cfg.base_url, cfg.model],
        "params": params,
        "json": request.json_output,
        "tools": request.tools or [],
        "tool_choice": request.tool_choice,
        "parallel_tool_calls": request.parallel_tool_calls,
        "response_format": request.response_format,
        "messages": request.messages,
    }
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def encode_result(result: LLMResult) -> str:
    return json.dumps(
        {
            "text": result.text,
            "model": result.model,
            "thinking": result.thinking,
            "finish_reason": result.finish_reason,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments, "arguments_error": c.arguments_error}
                for c in result.tool_calls
            ],
            "usage": result.usage.model_dump(),
        }
    )


def decode_result(data: str | bytes) -> LLMResult:
    raw = json.loads(data)
    return LLMResult(
        text=raw["text"],
        model=raw["model"],
        usage=Usage.model_validate(raw.get("usage") or {}),
        tool_calls=[ToolCallRequest(**c) for c in raw.get("tool_calls") or []],
        thinking=raw.get("thinking") or "",
        finish_reason=raw.get("finish_reason"),
    )


class LRUCache:
    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._data: OrderedDict[str, str] = OrderedDict()

    async def get(self, key: str) -> LLMResult | None:
        data = self._data.get(key)
        if data is None:
            return None
        self._data.move_to_end(key)
        return decode_result(data)

    async def put(self, key: str, result: LLMResult) -> None:
        self._data[key] = encode_result(result)
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    async def aclose(self) -> None:
        self._data.clear()


class RedisCache:
    """A cache outage never fails a model call: errors are logged and count as misses."""

    def __init__(self, url: str, prefix: str = "agentix:", ttl_s: int = DEFAULT_TTL_S) -> None:
        import redis.asyncio as redis

        self._redis = redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.prefix = f"{prefix}llmcache:"
        self.ttl_s = ttl_s

    async def get(self, key: str) -> LLMResult | None:
        try:
            data = await self._redis.get(self.prefix + key)
        except Exception as exc:
            log.warning("output cache read failed: %s", exc)
            return None
        return decode_result(data) if data else None

    async def put(self, key: str, result: LLMResult) -> None:
        try:
            await self._redis.set(self.prefix + key, encode_result(result), ex=self.ttl_s)
        except Exception as exc:
            log.warning("output cache write failed: %s", exc)

    async def aclose(self) -> None:
        await self._redis.aclose()
