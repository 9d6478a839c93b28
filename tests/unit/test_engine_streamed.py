"""A takeover does not stream a node's tokens twice: what the node had streamed is read from its
events; the regenerated answer is kept back while it repeats that prefix; a regeneration that
departs from it (or stops short) gives way to a continuation of the prefix."""

from __future__ import annotations

from services.dispatcher.engine.streamed import already_streamed, complete_after_prefix
from services.dispatcher.llm.api import Delta, DeltaSink, LLMRequest, LLMResult
from shared.contract.events import AnyEvent, EvalEvent, NodeEndEvent, NodeStartEvent, TokenEvent
from tests.unit.engine_fakes import Harness, graph, node


def _log() -> list[AnyEvent]:
    return [NodeStartEvent(task_id="t", node_id="a", kind="agent"), TokenEvent(task_id="t", node_id="a", text="ab"),
            NodeEndEvent(task_id="t", node_id="a", status="done", duration_ms=1.0),
            NodeStartEvent(task_id="t", node_id="b", kind="agent"), TokenEvent(task_id="t", node_id="b", text="one "),
            NodeStartEvent(task_id="t", node_id="c", kind="agent"), TokenEvent(task_id="t", node_id="b", text="two"),
            NodeStartEvent(task_id="t", node_id="d", kind="tool")]


def test_the_tokens_of_unfinished_nodes_since_their_start_are_what_was_streamed() -> None:
    assert already_streamed(_log()) == {"b": "one two"}
    again = [*_log(), NodeStartEvent(task_id="t", node_id="b", kind="agent"),
             TokenEvent(task_id="t", node_id="b", text="x")]
    assert already_streamed(again) == {"b": "x"}  # a node started again (a retry) starts over
    graded = [*_log(), EvalEvent(task_id="t", node_id="b", score=0.1, grade="poor")]
    assert already_streamed(graded) == {}  # its tokens may be two answers: it runs again from its start


class Scripted:
    """Streams each scripted answer in 3-character deltas; records the requests."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[LLMRequest] = []

    async def __call__(self, request: LLMRequest, on_delta: DeltaSink) -> LLMResult:
        self.requests.append(request)
        text = self.answers.pop(0)
        for i in range(0, len(text), 3):
            await on_delta(Delta("token", text[i:i + 3]))
        return LLMResult(text=text, model="m")


async def _run(model: Scripted, prefix: str) -> tuple[LLMResult, str]:
    seen: list[str] = []

    async def sink(delta: Delta) -> None:
        seen.append(delta.text)

    request = LLMRequest(messages=[{"role": "user", "content": "q"}])
    result = await complete_after_prefix(model, request, prefix, sink)
    return result, "".join(seen)


async def test_a_regeneration_that_repeats_the_prefix_streams_only_what_follows() -> None:
    model = Scripted("the quick brown fox")
    result, streamed = await _run(model, "the qu")
    assert streamed == "ick brown fox" and result.text == "the quick brown fox"
    assert len(model.requests) == 1


async def test_a_diverging_regeneration_is_stopped_and_the_prefix_continued() -> None:
    model = Scripted("a slow red fox", "ick brown fox")
    result, streamed = await _run(model, "the qu")
    assert streamed == "ick brown fox" and result.text == "the quick brown fox"
    assert model.requests[1].messages[-1] == {"role": "assistant", "content": "the qu"}


async def test_a_regeneration_shorter_than_the_prefix_is_continued_too() -> None:
    model = Scripted("the", "")
    result, streamed = await _run(model, "the quick")
    assert streamed == "" and result.text == "the quick"
    assert len(model.requests) == 2


async def test_an_agent_node_taken_over_mid_stream_streams_the_rest_only() -> None:
    h = Harness(graph([node("in", "input"), node("a", "agent", prompt="the quick brown fox"),
                       node("out", "output", value="{{ a }}")], [("in", "a"), ("a", "out")]))
    runner = h.make_runner()
    runner.deps.streamed = {"a": "the quick "}
    outcome = await runner.run()
    tokens = "".join(e.text for e in h.of("token", "a"))
    assert tokens == "brown fox "  # the fake streams word by word
    assert outcome.output == {"out": "the quick brown fox"} and len(h.llm.requests) == 1
