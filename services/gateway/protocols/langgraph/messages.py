"""Conversation messages in LangChain's serialized shape (`type` human | ai, `content`, `id`…),
as LangGraph clients read them from `values.messages`. A message keeps the id its client gave it
(`ChatMessage.client_id`); a model's answer is known by its run's (`run-<run id>`), so the message
streamed live and the one stored later are the same message."""

from __future__ import annotations

from typing import Any

from services.gateway.chat.tables import ChatMessage
from services.gateway.protocols.langgraph.refusals import refused

ANSWER_PREFIX = "run-"


def answer_id(run_id: str, node_id: str | None = None) -> str:
    return f"{ANSWER_PREFIX}{run_id}" if node_id is None else f"{ANSWER_PREFIX}{run_id}-{node_id}"


def run_of_answer(message_id: str) -> str | None:
    """The run whose answer `message_id` may name (`answer_id`, an error's `-error` after it), or None."""
    if not message_id.startswith(ANSWER_PREFIX):
        return None
    return message_id[len(ANSWER_PREFIX):].removesuffix("-error")


def human(message_id: str, content: str) -> dict[str, Any]:
    return {"type": "human", "content": content, "id": message_id, "name": None, "example": False,
            "additional_kwargs": {}, "response_metadata": {}}


def ai(message_id: str, content: str, *, model: str | None = None, usage: dict[str, Any] | None = None,
       message_type: str = "text", chunk: bool = False) -> dict[str, Any]:
    usage_metadata = None
    if usage:
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        usage_metadata = {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}
    body: dict[str, Any] = {
        "type": "AIMessageChunk" if chunk else "ai", "content": content, "id": message_id, "name": None,
        "example": False, "additional_kwargs": {}, "tool_calls": [], "invalid_tool_calls": [],
        "response_metadata": {"model_name": model, "message_type": message_type}, "usage_metadata": usage_metadata,
    }
    if chunk:
        body["tool_call_chunks"] = []
    return body


def from_row(message: ChatMessage) -> dict[str, Any]:
    """A stored message as LangGraph clients read it: by the id the client gave it, if any."""
    if message.role == "user":
        return human(message.client_id or message.id, message.content)
    suffix = "-error" if message.message_type == "error" else ""
    return ai(message.client_id or answer_id(message.run_id or message.id) + suffix, message.content,
              model=message.model, usage=message.usage, message_type=message.message_type)


def text_of(content: Any, field: str) -> str:
    """A message's text: a string, or a content list of text parts. Another part (an image, a
    file) is refused, naming `field`: the chat agent takes text, and dropping the part would
    answer a question the client did not ask."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise refused(field, "a message's `content` is a string or a list of text parts")
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text", ""), str):
            texts.append(part.get("text", ""))
        else:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise refused(field, f"a {kind!r} content part is not supported (the chat agent takes text)")
    return "".join(texts)
