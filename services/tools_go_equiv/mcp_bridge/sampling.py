"""Sampling for bridged MCP servers that ask for it (`sampling/createMessage`), on servers whose
registration opted in (`sampling: true`): answered by the configured model, the OpenAI-compatible
endpoint of `AGENTIX_LLM_BASE_URL` / `AGENTIX_LLM_MODEL` / `AGENTIX_LLM_API_KEY` (the one the
dispatcher's built-in model and tools-go's other model uses are). Text only: a request with
images, audio or tools is refused naming what it holds."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types

from shared.settings import ToolsGoSettings

log = logging.getLogger("agentix.tools_go.mcp")


def _text(content: Any) -> str | None:
    """The text of a message's content (one block or a list of them); None when any is not text."""
    blocks = content if isinstance(content, list) else [content]
    if not all(isinstance(b, types.TextContent) for b in blocks):
        return None
    return "".join(b.text for b in blocks)


class Sampler:
    def __init__(self, model: str, base_url: str, api_key: str | None) -> None:
        from openai import AsyncOpenAI  # loaded only where a model is configured

        self.model = model
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=1, timeout=120)

    @classmethod
    def from_settings(cls, settings: ToolsGoSettings) -> Sampler | None:
        if not settings.llm_base_url or not settings.llm_model:
            return None
        return cls(settings.llm_model, settings.llm_base_url, settings.llm_api_key)

    async def __call__(self, context: Any, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult | types.ErrorData:  # fmt: skip
        if params.tools:
            return types.ErrorData(code=types.INVALID_PARAMS, message="sampling with tools is not supported")
        messages: list[dict[str, str]] = []
        if params.system_prompt:
            messages.append({"role": "system", "content": params.system_prompt})
        for message in params.messages:
            text = _text(message.content)
            if text is None:
                return types.ErrorData(code=types.INVALID_PARAMS,
                                       message="sampling supports text content only (no images, audio or tool use)")
            messages.append({"role": message.role, "content": text})
        from openai import OpenAIError

        try:
            resp = await self._client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=params.max_tokens,  # type: ignore[arg-type]
                temperature=params.temperature, stop=params.stop_sequences or None,
            )  # fmt: skip
        except OpenAIError as exc:
            log.warning("sampling for an MCP server failed: %s", exc)
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the model failed: {type(exc).__name__}")
        choice = resp.choices[0]
        stop = "maxTokens" if choice.finish_reason == "length" else "endTurn"
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text",
                                         text=choice.message.content or ""), model=resp.model or self.model,
                                         stop_reason=stop)  # fmt: skip
