"""The agent node's `history` field: earlier turns go between `system` and `prompt`."""

from __future__ import annotations

import itertools
from typing import Any

from shared.contract.validate import validate_dsl
from tests.unit.engine_fakes import Harness, graph, node

TURNS = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]


def line(agent: dict[str, Any]) -> dict[str, Any]:
    nodes = [node("in", "input"), agent, node("out", "output", value="{{ x }}")]
    return graph(nodes, list(itertools.pairwise([n["id"] for n in nodes])))


async def test_history_sits_between_system_and_prompt() -> None:
    doc = line(node("x", "agent", system="Be brief.", history="{{ input.history }}", prompt="{{ in.text }}"))
    h = Harness(doc, input={"text": "And you?", "history": TURNS})
    outcome = await h.run()
    assert outcome.status == "done"
    assert h.llm.requests[0].messages == [
        {"role": "system", "content": "Be brief."}, *TURNS, {"role": "user", "content": "And you?"}]


async def test_history_as_json_text_or_empty_is_accepted() -> None:
    doc = line(node("x", "agent", history="{{ json(input.history) }}", prompt="q"))
    h = Harness(doc, input={"history": TURNS})
    assert (await h.run()).status == "done"
    assert h.llm.requests[0].messages == [*TURNS, {"role": "user", "content": "q"}]
    empty = Harness(doc, input={"history": []})
    assert (await empty.run()).status == "done"
    assert empty.llm.requests[0].messages == [{"role": "user", "content": "q"}]


async def test_a_history_that_is_not_messages_fails_the_node_clearly() -> None:
    doc = line(node("x", "agent", history="{{ input.history }}", prompt="q"))
    for bad in ({"role": "user"}, [{"role": "tool", "content": "x"}], ["hi"], 5):
        outcome = await Harness(doc, input={"history": bad}).run()
        assert outcome.status == "failed" and outcome.code == "template", bad
        assert "history" in (outcome.error or "")


def test_history_templates_are_validated_like_the_others() -> None:
    doc = line(node("x", "agent", history="{{ nope.output }}", prompt="q"))
    result = validate_dsl(doc)
    assert [e.code for e in result.errors] == ["unknown_reference"]
    assert result.errors[0].field == "config.history"
