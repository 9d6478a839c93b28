"""Checkpoints: approvals (approve / reject / timeout, several at once), resume after a crash
without re-running finished nodes, retry re-running only what failed, redelivery of a finished
task."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from services.dispatcher.engine.ports import Decision
from shared.contract.base import utcnow
from shared.contract.tools import ToolMeta
from tests.unit.engine_fakes import Harness, graph, node


def counting(h: Harness, name: str, counter: dict[str, int], fail_first: int = 0) -> None:
    async def fn(args: dict[str, Any], meta: ToolMeta) -> str:
        counter[meta.node_id or ""] = counter.get(meta.node_id or "", 0) + 1
        if counter[meta.node_id or ""] <= fail_first:
            raise RuntimeError("flaky")
        return f"{meta.node_id} ran"

    h.tools.add(name, fn)


async def crash_while_held_then_run_again(h: Harness, calls: dict[str, int]) -> Any:
    """The graph's `hold` tool node is entered, the dispatcher dies there (no terminal state is
    written), and another one runs the task from the same checkpoint store; `calls` counts each
    node's tool calls."""
    entered, hold = asyncio.Event(), asyncio.Event()

    async def held(args: dict[str, Any], meta: ToolMeta) -> str:
        calls[meta.node_id or ""] = calls.get(meta.node_id or "", 0) + 1
        entered.set()
        await hold.wait()
        return f"{meta.node_id} ran"

    h.tools.add("hold", held)
    crashed = asyncio.create_task(h.run())
    await entered.wait()
    crashed.cancel()
    await asyncio.gather(crashed, return_exceptions=True)
    hold.set()
    return await h.run()


def approval_doc(timeout_s: float | None = None) -> dict[str, Any]:
    approval = node("ok", "approval", message="Send it?")
    if timeout_s:
        approval["config"]["timeout_s"] = timeout_s
    return graph([node("in", "input"), node("a", "tool", tool="count"), approval,
                  node("send", "tool", tool="count"), node("out", "output", value="{{ send }} / {{ ok.decision }}")],
                 [("in", "a"), ("a", "ok"), ("ok", "send"), ("send", "out")])


async def test_approve_resumes_without_rerunning_finished_nodes() -> None:
    calls: dict[str, int] = {}
    h = Harness(approval_doc())
    counting(h, "count", calls)
    first = await h.run()
    assert first.status == "waiting" and first.waiting == ["ok"]
    assert calls == {"a": 1}
    second = await h.run({"ok": Decision("ok", "approve", by="boss", comment="go")})
    assert second.status == "done" and second.output == {"out": "send ran / approve"}
    assert calls == {"a": 1, "send": 1}
    decision = h.of("approval.decision")[0]
    assert (decision.decision, decision.by, decision.comment) == ("approve", "boss", "go")
    statuses = [e.status for e in h.of("status")]
    assert statuses == ["running", "waiting", "running", "done"]
    assert second.checkpoint.nodes["ok"].output["by"] == "boss"


async def test_reject_ends_the_task_rejected() -> None:
    calls: dict[str, int] = {}
    h = Harness(approval_doc())
    counting(h, "count", calls)
    await h.run()
    outcome = await h.run({"ok": Decision("ok", "reject", by="boss", comment="no way")})
    assert outcome.status == "rejected" and "no way" in outcome.error
    assert "send" not in calls
    assert h.events.events[-1].type == "done" and h.events.events[-1].status == "rejected"


async def test_timeout_decision_ends_rejected_with_an_event() -> None:
    h = Harness(approval_doc(timeout_s=60))
    counting(h, "count", {})
    first = await h.run()
    assert first.checkpoint.waiting["ok"].deadline is not None
    outcome = await h.run({"ok": Decision("ok", "timeout", by="system")})
    assert outcome.status == "rejected" and outcome.code == "approval_timeout"
    assert h.of("approval.decision")[0].decision == "timeout"


async def test_an_expired_deadline_is_applied_on_resume() -> None:
    h = Harness(approval_doc(timeout_s=60))
    counting(h, "count", {})
    await h.run()
    cp = await h.store.load("t1")
    assert cp is not None
    cp.waiting["ok"].deadline = utcnow() - timedelta(seconds=1)  # as if an hour went by
    await h.store.save(cp)
    outcome = await h.run()
    assert outcome.status == "rejected" and outcome.code == "approval_timeout"


async def test_approval_deadline_fires_while_other_branches_run() -> None:
    release = asyncio.Event()

    async def slow(args: dict[str, Any], meta: ToolMeta) -> str:
        await release.wait()
        return "x"

    doc = graph([node("in", "input"), {"id": "ok", "kind": "approval", "config": {"timeout_s": 0.03}},
                 node("slow", "tool", tool="slow")], [("in", "ok"), ("in", "slow")])
    h = Harness(doc)
    h.tools.add("slow", slow)
    outcome = await h.run()
    assert outcome.status == "rejected" and outcome.code == "approval_timeout"
    assert h.of("node.end", "slow")[0].status == "cancelled"


async def test_several_approvals_wait_at_once_and_are_addressed_by_node_id() -> None:
    calls: dict[str, int] = {}
    doc = graph([node("in", "input"), node("left", "approval"), node("right", "approval"),
                 node("l2", "tool", tool="count"), node("r2", "tool", tool="count"),
                 node("out", "output", value="{{ l2 }}+{{ r2 }}")],
                [("in", "left"), ("in", "right"), ("left", "l2"), ("right", "r2"), ("l2", "out"), ("r2", "out")])
    h = Harness(doc)
    counting(h, "count", calls)
    assert (await h.run()).waiting == ["left", "right"]
    second = await h.run({"right": Decision("right", "approve", by="x")})
    assert second.status == "waiting" and second.waiting == ["left"]
    assert calls == {"r2": 1}
    third = await h.run({"left": Decision("left", "approve", by="y")})
    assert third.status == "done" and third.output == {"out": "l2 ran+r2 ran"}
    assert calls == {"r2": 1, "l2": 1}


async def test_resume_after_a_crash_does_not_rerun_finished_nodes() -> None:
    calls: dict[str, int] = {}
    doc = graph([node("in", "input"), node("a", "tool", tool="count"), node("b", "tool", tool="count"),
                 node("c", "tool", tool="hold"), node("out", "output", value="{{ a }},{{ b }},{{ c }}")],
                [("in", "a"), ("a", "b"), ("b", "c"), ("c", "out")])
    h = Harness(doc)
    counting(h, "count", calls)
    outcome = await crash_while_held_then_run_again(h, calls)
    assert outcome.status == "done" and outcome.output == {"out": "a ran,b ran,c ran"}
    assert calls == {"a": 1, "b": 1, "c": 2}


async def test_retry_reruns_only_the_failed_node() -> None:
    calls: dict[str, int] = {}
    doc = graph([node("in", "input"), node("a", "tool", tool="count"), node("b", "tool", tool="flaky"),
                 node("c", "tool", tool="count"), node("out", "output", value="{{ a }},{{ b }},{{ c }}")],
                [("in", "a"), ("in", "b"), ("a", "c"), ("b", "c"), ("c", "out")])
    h = Harness(doc)
    counting(h, "count", calls)
    counting(h, "flaky", calls, fail_first=1)
    first = await h.run()
    assert first.status == "failed" and calls == {"a": 1, "b": 1}
    again = await h.run()  # a redelivery of the same attempt does not run anything
    assert again.status == "failed" and calls == {"a": 1, "b": 1}
    retried = await h.run(retry=1)
    assert retried.status == "done" and retried.output == {"out": "a ran,b ran,c ran"}
    assert calls == {"a": 1, "b": 2, "c": 1}
    running = [e for e in h.of("status") if e.status == "running"]
    assert running[-1].retry == 1


async def test_a_finished_task_is_not_run_again() -> None:
    calls: dict[str, int] = {}
    doc = graph([node("in", "input"), node("a", "tool", tool="count")], [("in", "a")])
    h = Harness(doc)
    counting(h, "count", calls)
    assert (await h.run()).status == "done"
    count = len(h.events.events)
    assert (await h.run()).status == "done"
    assert calls == {"a": 1} and len(h.events.events) == count


async def test_checkpoint_is_written_after_every_node_and_pins_prompts() -> None:
    doc = graph([node("in", "input"), node("a", "agent", prompt="{{ prompts.support_system }}"),
                 node("b", "output", value="{{ a }}")], [("in", "a"), ("a", "b")])
    h = Harness(doc)
    outcome = await h.run()
    assert h.store.saves >= 3
    cp = outcome.checkpoint
    assert cp.prompts == {"support_system": "Be kind."} and cp.prompt_versions == {"support_system": 3}
    assert cp.chain_revision == 1 and cp.event_n == h.events.n
    assert cp.usage.total_tokens > 0


class SnapshotStore:
    """Records what each checkpoint write stored: which nodes it holds as done, and its status."""

    def __init__(self, h: Harness) -> None:
        self.writes: list[tuple[str, list[str]]] = []
        inner = h.store.save

        async def save(cp: Any) -> None:
            await inner(cp)
            self.writes.append((cp.status, sorted(k for k, s in cp.nodes.items() if s.status == "done")))

        h.store.save = save  # type: ignore[method-assign]


async def test_nodes_that_ask_nothing_are_checkpointed_with_the_next_write() -> None:
    calls: dict[str, int] = {}
    doc = graph([node("in", "input"), node("a", "tool", tool="count"), node("b", "tool", tool="count"),
                 node("out", "output", value="{{ a }},{{ b }}")], [("in", "a"), ("a", "b"), ("b", "out")])
    h = Harness(doc)
    counting(h, "count", calls)
    snapshots = SnapshotStore(h)
    outcome = await h.run()
    assert outcome.status == "done"
    # The start of the run and `in` go with the write before `a` runs; `out` with the end.
    assert snapshots.writes == [("running", ["in"]), ("running", ["a", "in"]), ("running", ["a", "b", "in"]),
                                ("done", ["a", "b", "in", "out"])]
    first = outcome.checkpoint
    assert first is not None and first.chain_revision == 1 and first.prompt_versions == {"support_system": 3}


async def test_a_redelivery_recomputes_what_was_not_stored_and_reruns_nothing_with_effects() -> None:
    calls: dict[str, int] = {}
    doc = graph([node("in", "input"), node("a", "tool", tool="count"), node("out", "output", value="{{ a }}"),
                 node("later", "tool", tool="hold")], [("in", "a"), ("a", "out"), ("a", "later")])
    h = Harness(doc)
    counting(h, "count", calls)
    outcome = await crash_while_held_then_run_again(h, calls)  # `out` may have ended: in memory only
    assert outcome.status == "done" and outcome.output == {"out": "a ran"}
    assert calls == {"a": 1, "later": 2}  # `a` came from the checkpoint; `out` was worked out again
