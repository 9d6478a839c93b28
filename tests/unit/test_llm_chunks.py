"""The streamed chat completion read as dicts: SSE framing across any cut of the body into
reads, the end marker, error events and malformed payloads (the real server's streams are
covered by the integration tests)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from services.dispatcher.llm.chunks import ChatChunks, SSEDecoder, reasoning_of, usage_of
from services.dispatcher.llm.errors import AttemptError


def reads_of(text: str, *cuts: int) -> list[bytes]:
    """The text's UTF-8 bytes as a response body arrives: cut at the given byte offsets, else
    one read per line (as a model server streams its events)."""
    raw = text.encode()
    if cuts:
        return [raw[start:end] for start, end in itertools.pairwise([0, *cuts, len(raw)])]
    return raw.splitlines(keepends=True)


def events_of(reads: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    return [data for read in reads for data in decoder.feed(read)] + decoder.end()


def chunks_of(reads: list[bytes]) -> list[dict[str, Any]]:
    """What `endpoint` reads: each read's chunks, until `[DONE]` or the body's end."""
    chunks = ChatChunks("m")
    out: list[dict[str, Any]] = []
    for read in reads:
        out += chunks.feed(read)
        if chunks.failure is not None:
            raise chunks.failure
        if chunks.done:
            return out
    out += chunks.end()
    if chunks.failure is not None:
        raise chunks.failure
    return out


def collect(text: str) -> list[dict[str, Any]]:
    return chunks_of(reads_of(text))


def test_events_are_split_on_blank_lines_and_multi_line_data_is_joined() -> None:
    text = ": a comment\nevent: message\nid: 7\ndata: one\ndata:two\n\nretry: 10\ndata: three\n\n\ndata: last"
    assert events_of(reads_of(text)) == ["one\ntwo", "three", "last"]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_sse_line_ending_and_any_cut_between_reads_give_the_same_events(newline: str) -> None:
    text = newline.join(["data: {\"a\": \"é→😀\"}", "", ": note", "data:x", "data: y", "", ""])
    whole = events_of(reads_of(text, len(text.encode())))
    assert whole == ['{"a": "é→😀"}', "x\ny"]
    for cut in range(1, len(text.encode())):  # a line, a CRLF or a UTF-8 character split in two
        assert events_of(reads_of(text, cut)) == whole, cut
    assert events_of(reads_of(text, *range(1, len(text.encode())))) == whole


def test_a_read_holding_several_events_gives_them_all_in_order() -> None:
    """A paced reader takes what came over one interval in one read."""
    parts = [{"choices": [{"delta": {"content": piece}}]} for piece in ("a", "b", "c")]
    one_read = "".join(f"data: {json.dumps(p)}\n\n" for p in parts) + "data: [DONE]\n\n"
    chunks = ChatChunks("m")
    assert chunks.feed(one_read.encode()) == parts
    assert chunks.done
    assert chunks.feed(b"data: {}\n\n") == []  # nothing after the end marker


def test_chunks_stop_at_done_and_keep_every_field() -> None:
    first = {"choices": [{"index": 0, "delta": {"content": "Hi", "reasoning_content": "hm"}, "finish_reason": None}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    text = f"data: {json.dumps(first)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\ndata: {json.dumps(first)}\n\n"
    chunks = collect(text)
    assert chunks == [first, usage]
    assert reasoning_of(chunks[0]["choices"][0]["delta"]) == "hm"
    assert usage_of(chunks[1]) == (3, 2)
    assert usage_of(chunks[0]) is None


def test_an_error_event_is_a_broken_stream_with_the_servers_message() -> None:
    text = 'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: {"error": {"message": "overloaded"}}\n\n'
    with pytest.raises(AttemptError) as caught:
        collect(text)
    assert caught.value.code == "stream_broken"
    assert "overloaded" in caught.value.message


def test_a_payload_that_is_not_a_json_object_is_refused() -> None:
    with pytest.raises(json.JSONDecodeError):
        collect('data: {"choices": [\n\n')
    with pytest.raises(AttemptError) as caught:
        collect("data: [1, 2]\n\n")
    assert caught.value.code == "stream_broken"


def test_json_the_fast_parser_refuses_is_read_as_the_standard_library_reads_it() -> None:
    """NaN and integers over 64 bits are JSON to Python's parser (and were read before the fast
    one came): a server that sends them is not cut off."""
    chunks = collect('data: {"usage": {"prompt_tokens": 123456789012345678901234567890}, "x": NaN}\n\n')
    assert chunks[0]["usage"]["prompt_tokens"] == 123456789012345678901234567890
    assert chunks[0]["x"] != chunks[0]["x"]  # NaN


def test_bytes_that_are_not_utf8_become_replacement_characters_not_a_crash() -> None:
    assert chunks_of([b'data: {"a": "x\xffy"}\n\n']) == [{"a": "x\ufffdy"}]


def test_an_unterminated_last_event_is_read_at_the_end_of_the_body() -> None:
    assert chunks_of([b'data: {"a": 1}\n\ndata: {"b"', b': 2}']) == [{"a": 1}, {"b": 2}]


def test_the_chunks_before_a_broken_one_in_the_same_read_are_still_given() -> None:
    """What the model said before its stream broke reaches the caller (then it is a broken
    stream, not a failure before any output that another model may take over)."""
    chunks = ChatChunks("m")
    got = chunks.feed(b'data: {"a": 1}\n\ndata: {"b": \n\ndata: {"c": 3}\n\n')
    assert got == [{"a": 1}] and isinstance(chunks.failure, json.JSONDecodeError)
    assert chunks.feed(b'data: {"d": 4}\n\n') == []  # nothing after the failure
    chunks = ChatChunks("m")
    assert chunks.feed(b'data: {"a": 1}\n\ndata: {"error": {"message": "overloaded"}}\n\n') == [{"a": 1}]
    assert isinstance(chunks.failure, AttemptError) and "overloaded" in chunks.failure.message
