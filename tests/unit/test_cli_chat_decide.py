"""`agentix chat` asks y/n when a run waits for an approval — a tool call's (`tool`/`args` in the
request) or a plan's — and sends the answer to the run's approval route once (the gateway takes
it as soon as the run's log says it waits); a refusal is shown as the gateway words it."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from agentix.chat import Chat
from agentix.chat_view import ChatView


class Gateway:
    """Answers the approval and run routes as the gateway does; refuses the first `busy` decisions."""

    def __init__(self, busy: int = 0, state: str = "running") -> None:
        self.busy, self.state = busy, state
        self.decisions: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/approval"):
            if self.busy:
                self.busy -= 1
                return httpx.Response(409, json={"title": "Conflict", "detail": "not waiting for approval"})
            self.decisions.append(json.loads(request.content))
            return httpx.Response(202, json={})
        return httpx.Response(200, json={"id": "t_1", "state": self.state})


def _chat(gateway: Gateway, answers: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[Chat, io.StringIO]:
    typed = iter(answers)

    def fake_input(prompt: str) -> str:
        out.write(prompt)
        return next(typed)

    monkeypatch.setattr("builtins.input", fake_input)
    out = io.StringIO()
    client = httpx.Client(base_url="http://gateway", transport=httpx.MockTransport(gateway))
    return Chat(client, {}, view=ChatView(out, styled=False)), out


def test_a_tool_call_is_asked_about_with_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = Gateway()
    chat, out = _chat(gateway, ["y"], monkeypatch)
    assert chat.decide("t_1", {"tool": "sandbox_run", "args": {"code": "print(1)"}})
    assert 'allow sandbox_run({"code": "print(1)"})? [y/n] ' in out.getvalue()
    assert gateway.decisions == [{"decision": "approve"}]


def test_anything_but_yes_rejects_a_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = Gateway()
    chat, out = _chat(gateway, ["no"], monkeypatch)
    assert chat.decide("t_1", {"message": "Approve this plan?\n[\"look\"]"})
    assert "⏸ Approve this plan?" in out.getvalue() and "go ahead? [y/n] " in out.getvalue()
    assert gateway.decisions == [{"decision": "reject"}]


def test_a_refused_decision_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = Gateway(busy=1, state="cancelled")
    chat, out = _chat(gateway, ["y"], monkeypatch)
    assert chat.decide("t_1", {"tool": "kb_search", "args": {}})
    assert "not waiting for approval" in out.getvalue() and gateway.decisions == []


def test_the_end_of_input_leaves_the_run_waiting_and_says_how_to_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = Gateway()
    chat, out = _chat(gateway, [], monkeypatch)
    monkeypatch.setattr("builtins.input", lambda _prompt: (_ for _ in ()).throw(EOFError))
    assert not chat.decide("t_1", {"message": "Approve?"})
    assert "agentix approve t_1 [--reject]" in out.getvalue() and gateway.decisions == []
