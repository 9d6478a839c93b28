"""Redaction beyond the token stream: tool calls and results, node previews (also when a preview
was cut in the middle of a secret), errors and the final output; configured extra patterns come
from settings (`AGENTIX_REDACT_PATTERNS`) and reach the pool's redactor."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.dispatcher.engine.preview import preview
from services.dispatcher.harness.redact_events import RedactingEvents, redact_event
from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.redact import Redactor
from shared.contract.events import (
    DoneEvent,
    NodeEndEvent,
    StatusEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from shared.settings import Settings

KEY = "sk-proj-Zx81Qw72Lm90Pp34Ab56"
CUSTOM = "ACME-123456789"
R = Redactor(extra=[r"ACME-[0-9]{6,}"])


def test_tool_events_node_previews_errors_and_output_are_redacted() -> None:
    call = redact_event(ToolCallEvent(task_id="t", call_id="c1", tool="http_get",
                                      args={"headers": {"auth": f"Bearer {KEY}"}, "ids": [CUSTOM, 3]}), R)
    assert call.args == {"headers": {"auth": "Bearer [REDACTED:bearer]"}, "ids": ["[REDACTED:custom]", 3]}
    assert call.tool == "http_get" and call.call_id == "c1"
    result = redact_event(ToolResultEvent(task_id="t", call_id="c1", ok=False, duration_ms=1.0,
                                          result_preview=f"key={KEY}", error=f"denied for {CUSTOM}"), R)
    assert result.result_preview == "key=[REDACTED:api_key]" and result.error == "denied for [REDACTED:custom]"
    end = redact_event(NodeEndEvent(task_id="t", node_id="n", status="done", duration_ms=1.0, kind="agent",
                                    output_preview=preview({"text": f"use {KEY} now"})), R)
    assert KEY not in (end.output_preview or "") and "[REDACTED:api_key]" in (end.output_preview or "")
    done = redact_event(DoneEvent(task_id="t", status="done", output={"out": [f"a {KEY}", {"k": CUSTOM}]}), R)
    assert done.output == {"out": ["a [REDACTED:api_key]", {"k": "[REDACTED:custom]"}]}
    status = redact_event(StatusEvent(task_id="t", status="failed", error=f"tool said {KEY}", code="tool_error"), R)
    assert status.error == "tool said [REDACTED:api_key]" and status.code == "tool_error"


@pytest.mark.parametrize("cut", range(1, len(KEY) + 1))
def test_a_preview_cut_inside_a_secret_leaks_none_of_it(cut: int) -> None:
    # `preview` cuts at its limit and adds "…": the cut may fall anywhere inside the key.
    text = "x" * (299 - len("the key is ") - cut) + "the key is " + KEY + " and more words after it"
    shown = preview(text)
    assert shown.endswith("…") and KEY[:cut] in shown  # the raw preview does hold the key's start
    end = redact_event(NodeEndEvent(task_id="t", node_id="n", status="done", duration_ms=0.0,
                                    output_preview=shown), R)
    # Whatever could still be the start of a secret is dropped from the cut end.
    assert (end.output_preview or "").split("the key is")[-1] == " …"


def test_streamed_token_events_are_passed_as_they_are() -> None:
    # Already redacted on the token path: not scanned again (the hot path).
    token = TokenEvent(task_id="t", text=KEY)
    assert redact_event(token, R).text == KEY


async def test_the_sink_redacts_and_keeps_the_numbering() -> None:
    class Inner:
        def __init__(self) -> None:
            self.n = 0
            self.got: list[object] = []
            self.flushed = False

        async def emit(self, event: object) -> object:
            self.n += 1
            self.got.append(event)
            return event

        async def flush(self) -> None:
            self.flushed = True

    inner = Inner()
    sink = RedactingEvents(inner, R)
    await sink.emit(DoneEvent(task_id="t", status="done", output=CUSTOM))
    await sink.flush()
    assert sink.n == 1 and inner.flushed and inner.got[0].output == "[REDACTED:custom]"  # type: ignore[attr-defined]


def test_patterns_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Comma-separated; a comma inside {} [] () belongs to the pattern.
    monkeypatch.setenv("AGENTIX_REDACT_PATTERNS", r"ACME-[0-9]{6,}, PIN:\d{4} ,tok_[a-z,]+")
    settings = Settings(data_dir=tmp_path)
    assert settings.redact_patterns == ["ACME-[0-9]{6,}", r"PIN:\d{4}", "tok_[a-z,]+"]
    monkeypatch.setenv("AGENTIX_REDACT_PATTERNS", '["a{2,3}z", "PIN:\\\\d{4}"]')
    assert Settings(data_dir=tmp_path).redact_patterns == ["a{2,3}z", r"PIN:\d{4}"]
    monkeypatch.setenv("AGENTIX_REDACT_PATTERNS", r"ACME-[0-9]{6,},PIN:\d{4}")
    pool = ModelPool(Settings(data_dir=tmp_path))
    assert pool.redactor.redact(f"{CUSTOM} PIN:1234 {KEY}") == (
        "[REDACTED:custom] [REDACTED:custom] [REDACTED:api_key]")


def test_a_bad_configured_pattern_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bad redaction pattern"):
        ModelPool(Settings(data_dir=tmp_path, redact_patterns=["(unclosed"]))
