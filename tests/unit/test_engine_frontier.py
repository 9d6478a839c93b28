"""The frontier alone (no runner, no I/O): what is ready first, how a branch's choice kills the
other path, and how a join waits for every incoming edge."""

from __future__ import annotations

from services.dispatcher.engine.checkpoint import Checkpoint, NodeState
from services.dispatcher.engine.compile import compile_plan
from services.dispatcher.engine.frontier import Frontier
from tests.unit.engine_fakes import graph, node

DOC = graph(
    [node("in", "input"), {"id": "b", "kind": "branch", "config": {"condition": "in.v > 5"}},
     node("t", "output", value="T"), node("f", "output", value="F"), node("j", "output", value="J")],
    [("in", "b"), ("b", "t", "true"), ("b", "f", "false"), ("t", "j"), ("f", "j")],
)


def finish(frontier: Frontier, cp: Checkpoint, node_id: str, output: object = None) -> None:
    assert frontier.ready.popleft() == node_id
    cp.nodes[node_id] = NodeState(status="done", output=output)
    frontier.finished(node_id)


def test_a_branch_kills_the_path_it_did_not_choose_and_the_join_still_runs() -> None:
    cp = Checkpoint(task_id="t")
    frontier = Frontier(compile_plan(DOC), cp)
    assert list(frontier.ready) == ["in"]
    finish(frontier, cp, "in")
    finish(frontier, cp, "b", "true")
    assert list(frontier.ready) == ["t"] and frontier.skipped == ["f"] and cp.nodes["f"].status == "skipped"
    finish(frontier, cp, "t")
    assert list(frontier.ready) == ["j"]  # one live edge of two is enough, once both are settled


def test_a_resume_starts_after_the_finished_nodes() -> None:
    cp = Checkpoint(task_id="t", nodes={"in": NodeState(status="done"), "b": NodeState(status="done", output="false")})
    frontier = Frontier(compile_plan(DOC), cp)
    assert list(frontier.ready) == ["f"] and frontier.skipped == ["t"]
