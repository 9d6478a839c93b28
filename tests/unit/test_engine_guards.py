"""Engine guards: a coordinator's experts cannot start a coordinator, and a checkpoint over the
store's size limit fails the task `checkpoint_too_large` instead of crashing it."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from services.dispatcher.engine.checkpoint import Checkpoint, CheckpointTooLarge
from services.dispatcher.engine.context import NodeContext, NodeError
from services.dispatcher.engine.nodes import HANDLERS
from services.dispatcher.llm.api import LLMRequest, LLMResult
from shared.contract.tools import ToolMeta
from tests.unit.engine_fakes import FakeLLM, Harness, graph, node, tool_call


def line(*middle: dict[str, Any], out: str = "{{ x }}") -> dict[str, Any]:
    nodes = [node("in", "input"), *middle, node("out", "output", value=out)]
    ids = [n["id"] for n in nodes]
    return graph(nodes, list(itertools.pairwise(ids)))


async def test_an_expert_cannot_start_a_coordinator() -> None:
    """An expert whose tool runs a coordinator in-process (agent-as-tool) is refused."""
    decompositions = 0
    tool_replies: list[str] = []

    def script(request: LLMRequest) -> str | LLMResult:
        nonlocal decompositions
        system = request.messages[0]["content"]
        if "Split the goal" in system:
            decompositions += 1
            return json.dumps({"briefs": {"sneaky": "start a team"}})
        if "write the final answer" in system:
            return "final"
        last = request.messages[-1]
        if last["role"] == "tool":
            tool_replies.append(last["content"])
            return "gave up"
        # Only the outer expert tries (without the guard the inner team would just run once).
        return tool_call("spawn_team") if decompositions == 1 else "inner expert"

    doc = line(node("x", "coordinator", goal="g",
                    experts=[{"name": "sneaky", "system": "s", "tools": ["spawn_team"]}]), out="{{ json(x) }}")
    h = Harness(doc, llm=FakeLLM(script))

    refusals: list[str] = []

    async def spawn_team(args: dict[str, Any], meta: ToolMeta) -> Any:
        runner = h.runner
        assert runner is not None
        try:
            return await HANDLERS["coordinator"](NodeContext(runner.shared, runner.plan.nodes["x"]))
        except NodeError as exc:
            refusals.append(f"{exc.code}: {exc.message}")
            raise

    h.tools.add("spawn_team", spawn_team)
    outcome = await h.run()
    assert outcome.status == "done"
    assert decompositions == 1  # the nested coordinator never got to decompose
    assert refusals == ["nested_coordinator: node 'x': expert 'sneaky' of coordinator 'x' cannot start a "
                        "coordinator"]
    result = h.of("tool.result")[0]
    assert result.ok is False
    assert tool_replies == ["null"]  # the failed call's result, as the agent saw it
    experts = json.loads(outcome.output["out"])["experts"]
    assert experts[0]["status"] == "done" and experts[0]["result"] == "gave up"
    assert h.tools.calls == [("spawn_team", {})]


async def test_the_guard_is_scoped_to_the_expert() -> None:
    """Outside an expert (the same task, before and after) a coordinator runs normally."""

    def script(request: LLMRequest) -> str:
        if "Split the goal" in request.messages[0]["content"]:
            return json.dumps({"briefs": {"a": "b"}})
        return "ok"

    two = graph([node("in", "input"),
                 node("x", "coordinator", goal="g", experts=[{"name": "a", "system": "s"}]),
                 node("y", "coordinator", goal="g", experts=[{"name": "a", "system": "s"}]),
                 node("out", "output", value="{{ x.answer }}{{ y.answer }}")],
                [("in", "x"), ("x", "y"), ("y", "out")])
    outcome = await Harness(two, llm=FakeLLM(script)).run()
    assert outcome.status == "done" and outcome.output == {"out": "okok"}


def test_checkpoint_to_bytes_enforces_its_bound() -> None:
    cp = Checkpoint(task_id="t", output="x" * 2000)
    assert len(cp.to_bytes()) > 2000  # unbound: no limit
    with pytest.raises(CheckpointTooLarge) as caught:
        cp.bound(1000).to_bytes()
    assert caught.value.limit == 1000 and caught.value.size > 2000


async def test_an_oversize_checkpoint_fails_the_task_cleanly() -> None:
    async def big(args: dict[str, Any], meta: ToolMeta) -> str:
        return "y" * 50_000

    async def small(args: dict[str, Any], meta: ToolMeta) -> str:
        return "fine"

    doc = graph([node("in", "input"), node("a", "tool", tool="small"), node("b", "tool", tool="big"),
                 node("c", "tool", tool="small"), node("out", "output", value="{{ c }}")],
                [("in", "a"), ("a", "b"), ("b", "c"), ("c", "out")])
    h = Harness(doc)
    h.tools.add("big", big)
    h.tools.add("small", small)
    h.make_runner()
    assert h.runner is not None
    h.runner.deps.checkpoint_limit = 20_000
    outcome = await h.runner.run()
    assert outcome.status == "failed" and outcome.code == "checkpoint_too_large"
    assert "20000 bytes" in (outcome.error or "")
    assert [name for name, _ in h.tools.calls] == ["small", "big"]  # c never ran
    assert h.of("node.end", "b")[0].status == "failed"
    status = h.of("status")[-1]
    assert status.status == "failed" and status.code == "checkpoint_too_large"
    assert h.types()[-1] == "done" and h.of("done")[0].status == "failed"
    # The end is kept (without the outputs), so a redelivery does not run the task again.
    stored = Checkpoint.from_bytes(h.store.data["t1"])
    assert stored.status == "failed" and stored.code == "checkpoint_too_large" and stored.nodes == {}
    again = await h.run()
    assert again.status == "failed" and [name for name, _ in h.tools.calls] == ["small", "big"]


async def test_within_the_limit_nothing_changes() -> None:
    async def big(args: dict[str, Any], meta: ToolMeta) -> str:
        return "y" * 5_000

    doc = line(node("x", "tool", tool="big"))
    h = Harness(doc)
    h.tools.add("big", big)
    h.make_runner()
    assert h.runner is not None
    h.runner.deps.checkpoint_limit = 20_000
    outcome = await h.runner.run()
    assert outcome.status == "done" and outcome.output == {"out": "y" * 5_000}
