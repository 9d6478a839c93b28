"""`agentix chat` writes the answer as it streams, keeps thinking and tool steps on lines of their
own, shows a plan as a list and the queue position, and ignores heartbeats and engine steps."""

from __future__ import annotations

import io

from agentix.chat_view import ChatView


def _shown(events: list[tuple[str, dict]]) -> str:
    out = io.StringIO()
    view = ChatView(out, styled=False)
    for name, data in events:
        view.show(name, data)
    view.end_line()
    return out.getvalue()


def test_tokens_are_written_as_they_come_and_tool_steps_get_their_own_lines() -> None:
    out = io.StringIO()
    view = ChatView(out, styled=False)
    view.show("token", {"node_id": "ans", "text": "Let me "})
    assert out.getvalue() == "agent: Let me "  # no waiting for the end of the line
    view.show("tool.input", {"call_id": "c1", "tool": "weather", "delta": '{"ci'})
    view.show("tool.input", {"call_id": "c1", "tool": "weather", "delta": 'ty": "Oslo"}'})
    view.show("tool.call", {"call_id": "c1", "tool": "weather", "args": {"city": "Oslo"}})
    view.show("tool.result", {"call_id": "c1", "ok": True, "result_preview": "3C"})
    view.show("token", {"node_id": "ans", "text": "It is 3C."})
    view.end_line()
    assert out.getvalue().splitlines() == [
        "agent: Let me ", "  ⚙ weather …", '  ⚙ weather({"city": "Oslo"})', "  ⚙ ok 3C", "agent: It is 3C."]
    assert view.answered


def test_thinking_in_both_forms_is_set_apart_from_the_answer() -> None:
    lines = _shown([
        ("thinking.start", {"node_id": "ans"}), ("thinking.delta", {"node_id": "ans", "text": "hmm, "}),
        ("thinking.delta", {"node_id": "ans", "text": "Oslo"}), ("thinking.end", {"node_id": "ans"}),
        ("thinking", {"node_id": "ans", "text": "older form"}),
        ("token", {"node_id": "ans", "text": "Cold."}),
    ]).splitlines()
    assert lines == ["(thinking) hmm, Oslo", "(thinking) older form", "agent: Cold."]


def test_plan_queue_and_engine_noise() -> None:
    lines = _shown([
        ("queued", {"position": 2}), ("heartbeat", {"ts": 1}), ("status", {"status": "running"}),
        ("node.start", {"node_id": "plan", "kind": "agent"}),
        ("plan", {"steps": ["look it up", {"title": "answer"}]}),
        ("error", {"code": "model_skipped", "message": "m1 is down"}),
    ]).splitlines()
    assert lines == ["… waiting for 2 earlier run(s) of this conversation", "plan:", "  1. look it up",
                     "  2. answer", "! model_skipped: m1 is down"]


def test_a_new_speaker_starts_a_new_line() -> None:
    lines = _shown([("token", {"node_id": "plan", "text": '{"steps": []}'}),
                    ("token", {"node_id": "ans", "text": "Done."})]).splitlines()
    assert lines == ['agent: {"steps": []}', "agent: Done."]


class _InterruptedAfterWrite(io.StringIO):
    """A terminal whose user presses Ctrl-C just as the answer's text has been flushed."""

    def flush(self) -> None:
        super().flush()
        if self.getvalue():
            raise KeyboardInterrupt


def test_an_answer_cut_by_ctrl_c_right_after_it_is_shown_counts_as_answered() -> None:
    view = ChatView(_InterruptedAfterWrite(), styled=False)
    try:
        view.show("token", {"node_id": "ans", "text": "The first half"})
    except KeyboardInterrupt:
        pass
    assert view.answered  # so the stop says the partial answer is kept, as the gateway keeps it
