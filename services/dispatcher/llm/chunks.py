"""A streamed chat completion read as plain dicts: the response's Server-Sent Events decoded
from each read of the body, each `data:` payload parsed with orjson (a streamed completion is a chunk per
token: the stdlib's parser took 4% of the dispatcher's CPU on the e2e bench's runs, orjson a
quarter of that).

Why not the `openai` client's `AsyncStream`: it builds a pydantic model per chunk through the
SDK's lenient `construct` (type introspection for every field of every chunk). In a profile of
the dispatcher running agents that was a quarter of its CPU, more than everything else it does
per token together; a dict per chunk carries the same fields. The request is sent, and a refused
one raised, by `endpoint`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterable
from typing import Any

import orjson

from services.dispatcher.llm.errors import AttemptError

DONE = "[DONE]"
DRAIN_S = 0.1
REASONING_FIELDS = ("reasoning_content", "reasoning")  # DeepSeek, vLLM, OpenRouter extras


class SSEDecoder:
    """The `data` of each event of an SSE stream, decoded from the response body's bytes as they
    are read (several `data:` lines joined by newlines, as the SSE spec says); comments,
    `event:`, `id:` and `retry:` fields are skipped. Lines end with LF, CRLF or CR; SSE is UTF-8.

    Fed whatever one read of the body returned, not line by line through a text decoder nor
    through async generators: a read may hold one event or several (`endpoint` reads a stream
    at most once per token interval), and each layer of awaiting per event cost CPU per token."""

    def __init__(self) -> None:
        self._pending = b""  # the start of a line whose end has not arrived
        self._skip_lf = False  # the last read ended with CR: a LF opening the next one completes a CRLF
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        """The events this read completed, in order."""
        if not chunk:
            return []
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = False
        if self._pending:
            chunk = self._pending + chunk
        if b"\r" in chunk:
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, self._pending = chunk.split(b"\n")
        events: list[str] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append("\n".join(data))
                    data.clear()
            elif line.startswith(b"data:"):
                data.append(_value(line))
        return events

    def end(self) -> list[str]:
        """At the end of the body: an event it left unterminated (a line without its newline, or
        an event without the blank line that closes it)."""
        if self._pending.startswith(b"data:"):
            self._data.append(_value(self._pending))
        self._pending = b""
        events = ["\n".join(self._data)] if self._data else []
        self._data = []
        return events


def _value(line: bytes) -> str:
    """A `data:` line's value (one leading space is not part of it). Bytes that are not UTF-8
    become U+FFFD, as a text decoder would make them: the JSON parse says what is wrong."""
    return (line[6:] if line.startswith(b"data: ") else line[5:]).decode(errors="replace")


class ChatChunks:
    """The chunks of a streamed chat completion, as dicts, from the body's reads: `feed` gives
    the chunks a read completed, `end` those the body's end completed; `done` once `[DONE]`
    came (what follows it is ignored).

    A payload that is not JSON (`json.JSONDecodeError`), an error event or a chunk that is not
    an object (`AttemptError`, `stream_broken`) ends the stream: it becomes `failure`, and the
    chunks before it in the same read are still given, so what the model said before its
    stream broke reaches the caller, as it would have had each chunk come in a read of its own."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.done = False
        self.failure: Exception | None = None
        self._events = SSEDecoder()

    def feed(self, read: bytes) -> list[dict[str, Any]]:
        return self._chunks(self._events.feed(read))

    def end(self) -> list[dict[str, Any]]:
        return self._chunks(self._events.end())

    def _chunks(self, events: list[str]) -> list[dict[str, Any]]:
        chunks: list[dict[str, Any]] = []
        for data in events:
            if self.done or self.failure is not None:
                break
            if data.startswith(DONE):
                self.done = True
                break
            try:
                chunks.append(self._chunk(data))
            except (json.JSONDecodeError, AttemptError) as exc:
                self.failure = exc
        return chunks

    def _chunk(self, data: str) -> dict[str, Any]:
        chunk = _parse(data)
        if not isinstance(chunk, dict):
            raise AttemptError("stream_broken", f"model {self.model!r} sent a malformed response: a chunk that is "
                                                f"not a JSON object: {data[:200]}")
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else None
            raise AttemptError("stream_broken", f"model {self.model!r} sent an error in its stream: "
                                                f"{message if isinstance(message, str) and message else error}")
        return chunk


def _parse(data: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # What orjson refuses and the stdlib reads (NaN, integers over 64 bits), or the stdlib's
        # own error for what is not JSON at all.
        return json.loads(data)


async def drain(body: AsyncIterable[bytes]) -> None:
    """Read what follows `[DONE]` (the chunked body's end): a response read to its end leaves its
    connection in the pool for the next call; one closed early costs a new TCP connection per
    call. Bounded, so a server that keeps the stream open after `[DONE]` cannot hold us."""
    with contextlib.suppress(Exception):  # the answer is complete: how the rest goes is no error
        async with asyncio.timeout(DRAIN_S):
            async for _ in body:
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
