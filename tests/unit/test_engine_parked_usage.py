"""A task parked for an approval reports what its nodes spent so far: the `waiting` status event
carries the usage, and the resumed run's `done` keeps it (examples/approval.json's shape)."""

from __future__ import annotations

from services.dispatcher.engine.ports import Decision
from tests.unit.engine_fakes import Harness, graph, node

APPROVAL_AFTER_AGENT = graph(
    [node("in", "input"), node("draft", "agent", prompt="Draft a short announcement about: {{ in.text }}"),
     node("review", "approval", message="Publish this draft?"), node("out", "output", value="{{ draft.output }}")],
    [("in", "draft"), ("draft", "review"), ("review", "out")],
)


async def test_the_waiting_status_carries_the_usage_so_far_and_done_keeps_it() -> None:
    h = Harness(APPROVAL_AFTER_AGENT, input={"text": "the release"})
    parked = await h.run()
    assert parked.status == "waiting"
    [draft_end] = h.of("node.end", "draft")
    assert draft_end.usage is not None and draft_end.usage.total_tokens > 0
    [waiting] = [e for e in h.of("status") if e.status == "waiting"]
    assert waiting.usage == draft_end.usage

    done = await h.run({"review": Decision("review", "approve", by="boss")})
    assert done.status == "done"
    assert h.of("done")[0].usage == draft_end.usage  # nothing lost across the resume
