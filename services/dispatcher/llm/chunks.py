"""A streamed chat completion read as plain dicts: the response's Server-Sent Events decoded
line by line, each `data:` payload parsed with `json.loads`.

Why not the `openai` client's `AsyncStream`: it builds a pydantic model per chunk through the
SDK's lenient `construct` (type introspection for every field of every chunk). In a profile of
the dispatcher running agents that was a quarter of its CPU, more than everything else it does
per token together; a dict per chunk carries the same fields. The request is still sent, and a
refused one still raised, by the `openai` client (its passthrough `post`, in `endpoint`), so
status errors, auth and timeouts keep the SDK's semantics."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from services.dispatcher.llm.errors import AttemptError

DONE = "[DONE]"
DRAIN_S = 0.1
REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek, vLLM, OpenRouter extras


async def sse_data(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """The `data` of each event of an SSE stream (several `data:` lines joined by newlines, as
    the SSE spec says); comments, `event:`, `id:` and `retry:` fields are skipped."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:  # the stream ended without the blank line that closes its last event
        yield "\n".join(data)


async def chat_chunks(lines: AsyncIterable[str], model: str) -> AsyncIterator[dict[str, Any]]:
    """Each chunk of a streamed chat completion, until `[DONE]` or the end of the stream.
    Raises `json.JSONDecodeError` for a payload that is not JSON and `AttemptError`
    (`stream_broken`) for an error event or a chunk that is not an object."""
    async for data in sse_data(lines):
        if data.startswith(DONE):
            await drain(lines)
            return
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            raise AttemptError("stream_broken", f"model {model!r} sent a malformed response: a chunk that is not "
                                                f"a JSON object: {data[:200]}")
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else None
            raise AttemptError("stream_broken", f"model {model!r} sent an error in its stream: "
                                                f"{message if isinstance(message, str) and message else error}")
        yield chunk


async def drain(lines: AsyncIterable[str]) -> None:
    """Read what follows `[DONE]` (the chunked body's end): a response read to its end leaves its
    connection in the pool for the next call; one closed early costs a new TCP connection per
    call. Bounded, so a server that keeps the stream open after `[DONE]` cannot hold us."""
    with contextlib.suppress(Exception):  # the answer is complete: how the rest goes is no error
        async with asyncio.timeout(DRAIN_S):
            async for _ in lines:
                pass


def reasoning_of(part: dict[str, Any]) -> str | None:
    """The reasoning text a delta (or a message) carries, under whichever name the server uses."""
    for name in REASONING_FIELDS:
        value = part.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def usage_of(chunk: dict[str, Any]) -> tuple[int, int] | None:
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return None
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
