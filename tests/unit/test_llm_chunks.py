"""The streamed chat completion read as dicts: SSE framing, the end marker, error events and
malformed payloads (the real server's streams are covered by the integration tests)."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator

import pytest

from services.dispatcher.llm.chunks import chat_chunks, reasoning_of, sse_data, usage_of
from services.dispatcher.llm.errors import AttemptError


async def body_of(text: str, *reads: int) -> AsyncIterator[bytes]:
    """The text's UTF-8 bytes as a response body arrives: cut at the given byte offsets, else
    one read per line (as a model server streams its events)."""
    raw = text.encode()
    if reads:
        cuts = [0, *reads, len(raw)]
        for start, end in itertools.pairwise(cuts):
            yield raw[start:end]
    else:
        for line in raw.splitlines(keepends=True):
            yield line


async def collect(text: str) -> list[dict]:
    return [chunk async for chunk in chat_chunks(body_of(text), "m")]


async def test_events_are_split_on_blank_lines_and_multi_line_data_is_joined() -> None:
    text = ": a comment\nevent: message\nid: 7\ndata: one\ndata:two\n\nretry: 10\ndata: three\n\n\ndata: last"
    assert [d async for d in sse_data(body_of(text))] == ["one\ntwo", "three", "last"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
async def test_every_sse_line_ending_and_any_cut_between_reads_give_the_same_events(newline: str) -> None:
    text = newline.join(["data: {\"a\": \"é→😀\"}", "", ": note", "data:x", "data: y", "", ""])
    whole = [d async for d in sse_data(body_of(text, len(text.encode())))]
    assert whole == ['{"a": "é→😀"}', "x\ny"]
    for cut in range(1, len(text.encode())):  # a line, a CRLF or a UTF-8 character split in two
        assert [d async for d in sse_data(body_of(text, cut))] == whole, cut
    assert [d async for d in sse_data(body_of(text, *range(1, len(text.encode()))))] == whole


async def test_chunks_stop_at_done_and_keep_every_field() -> None:
    first = {"choices": [{"index": 0, "delta": {"content": "Hi", "reasoning_content": "hm"}, "finish_reason": None}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    text = f"data: {json.dumps(first)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\ndata: {json.dumps(first)}\n\n"
    chunks = await collect(text)
    assert chunks == [first, usage]
    assert reasoning_of(chunks[0]["choices"][0]["delta"]) == "hm"
    assert usage_of(chunks[1]) == (3, 2)
    assert usage_of(chunks[0]) is None


async def test_an_error_event_is_a_broken_stream_with_the_servers_message() -> None:
    text = 'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: {"error": {"message": "overloaded"}}\n\n'
    with pytest.raises(AttemptError) as caught:
        await collect(text)
    assert caught.value.code == "stream_broken"
    assert "overloaded" in caught.value.message


async def test_a_payload_that_is_not_a_json_object_is_refused() -> None:
    with pytest.raises(json.JSONDecodeError):
        await collect('data: {"choices": [\n\n')
    with pytest.raises(AttemptError) as caught:
        await collect("data: [1, 2]\n\n")
    assert caught.value.code == "stream_broken"


async def test_json_the_fast_parser_refuses_is_read_as_the_standard_library_reads_it() -> None:
    """NaN and integers over 64 bits are JSON to Python's parser (and were read before the fast
    one came): a server that sends them is not cut off."""
    chunks = await collect('data: {"usage": {"prompt_tokens": 123456789012345678901234567890}, "x": NaN}\n\n')
    assert chunks[0]["usage"]["prompt_tokens"] == 123456789012345678901234567890
    assert chunks[0]["x"] != chunks[0]["x"]  # NaN


async def test_what_follows_done_is_read_so_the_connection_can_be_reused() -> None:
    read: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        for part in [b"data: {}\n\n", b"data: [DONE]\n\n", b"\n", b"trailing"]:
            read.append(part)
            yield part

    assert [chunk async for chunk in chat_chunks(body(), "m")] == [{}]
    assert read[-1] == b"trailing"


async def test_bytes_that_are_not_utf8_become_replacement_characters_not_a_crash() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'data: {"a": "x\xffy"}\n\n'

    assert [chunk async for chunk in chat_chunks(body(), "m")] == [{"a": "x\ufffdy"}]
