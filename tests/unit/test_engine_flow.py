"""How a graph runs: branch table, joins, parallelism, failure, timeouts, cancel, budget."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.dispatcher.llm.api import LLMRequest
from shared.contract.tools import ToolMeta
from tests.unit.engine_fakes import FakeLLM, Harness, graph, node

OUT_T = node("t", "output", value="T")
OUT_F = node("f", "output", value="F")
OUT_D = node("d", "output", value="D")


def branch_doc(edges: list[tuple[str, ...]], *, cases: bool = False) -> dict[str, Any]:
    config = {"cases": [{"handle": "hi", "when": "in.v > 5"}]} if cases else {"condition": "in.v > 5"}
    targets = {e[1] for e in edges}
    after = [node("after", "output", value="".join(f"{{{{ {x} }}}}" for x in sorted(targets)))]
    nodes = [node("in", "input"), {"id": "b", "kind": "branch", "config": config}, OUT_T, OUT_F, OUT_D, *after]
    edges = [("in", "b"), *edges, *[(x, "after") for x in ("t", "f", "d") if x in targets]]
    return graph([n for n in nodes if n["id"] in targets | {"in", "b", "after"}], edges)


@pytest.mark.parametrize(("v", "edges", "ran", "skipped"), [
    # condition true / false with both handles wired
    (9, [("b", "t", "true"), ("b", "f", "false")], {"t"}, {"f"}),
    (1, [("b", "t", "true"), ("b", "f", "false")], {"f"}, {"t"}),
    # chosen handle has no edge → default edges go live
    (1, [("b", "t", "true"), ("b", "d", "default")], {"d"}, {"t"}),
    # chosen handle has an edge → default edges stay dead
    (9, [("b", "t", "true"), ("b", "d", "default")], {"t"}, {"d"}),
    # no edge for the handle and no default → the path ends quietly, downstream skipped
    (1, [("b", "t", "true")], set(), {"t", "after"}),
])
async def test_branch_table(v: int, edges: list[tuple[str, ...]], ran: set[str], skipped: set[str]) -> None:
    h = Harness(branch_doc(edges), input={"v": v})
    outcome = await h.run()
    assert outcome.status == "done"
    ends = {e.node_id for e in h.of("node.end")} - {"in", "b", "after"}
    assert ends == ran
    assert {e.node_id for e in h.of("node.skip")} == skipped
    assert [e.handle for e in h.of("branch")] == ["true" if v > 5 else "false"]
    if ran:
        assert outcome.output["after"] == {"t": "T", "f": "F", "d": "D"}[next(iter(ran))]


async def test_cases_branch_falls_back_to_default() -> None:
    h = Harness(branch_doc([("b", "t", "hi"), ("b", "d", "default")], cases=True), input={"v": 1})
    outcome = await h.run()
    assert [e.handle for e in h.of("branch")] == ["default"]
    assert outcome.output == {"d": "D", "after": "D"}


async def test_join_after_branch_runs_once() -> None:
    calls: list[str] = []

    def script(request: LLMRequest) -> str:
        calls.append(request.messages[-1]["content"])
        return "ok"

    doc = graph([node("in", "input"), node("b", "branch", condition="in.v"), node("yes", "agent", prompt="yes"),
                 node("no", "agent", prompt="no"), node("join", "agent", prompt="join {{ yes }}{{ no }}"),
                 node("out", "output", value="{{ join }}")],
                [("in", "b"), ("b", "yes", "true"), ("b", "no", "false"), ("yes", "join"), ("no", "join"),
                 ("join", "out")])
    h = Harness(doc, llm=FakeLLM(script), input={"v": True})
    outcome = await h.run()
    assert outcome.status == "done"
    assert calls == ["yes", "join ok"]  # join ran once, with the skipped branch as empty
    assert [e.node_id for e in h.of("node.start")].count("join") == 1
    assert [e.node_id for e in h.of("node.skip")] == ["no"]


async def test_fan_out_runs_concurrently() -> None:
    started = 0
    all_started = asyncio.Event()

    async def slow(args: dict[str, Any], meta: ToolMeta) -> str:
        nonlocal started
        started += 1
        if started == 4:
            all_started.set()
        await all_started.wait()  # would deadlock if the four ran one after another
        return meta.node_id or ""

    names = ["s1", "s2", "s3", "s4"]
    doc = graph([node("in", "input"), *[node(n, "tool", tool="slow") for n in names],
                 node("out", "output", value="{{ s1 }}{{ s2 }}{{ s3 }}{{ s4 }}")],
                [*[("in", n) for n in names], *[(n, "out") for n in names]])
    h = Harness(doc, timeout_s=10)
    h.tools.add("slow", slow)
    outcome = await h.run()
    assert outcome.output == {"out": "s1s2s3s4"}
    fan = [e for e in h.events.events if e.node_id in names and e.type in ("node.start", "node.end")]
    first_end = next(i for i, e in enumerate(fan) if e.type == "node.end")
    assert [e.type for e in fan[:first_end]] == ["node.start"] * 4


async def test_parallelism_limit_is_respected() -> None:
    active = peak = 0

    async def slow(args: dict[str, Any], meta: ToolMeta) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.005)
        active -= 1
        return "x"

    names = [f"s{i}" for i in range(6)]
    doc = graph([node("in", "input"), *[node(n, "tool", tool="slow") for n in names]], [("in", n) for n in names])
    h = Harness(doc, parallelism=2)
    h.tools.add("slow", slow)
    assert (await h.run()).status == "done" and peak == 2


async def test_failure_cancels_running_nodes_and_fails_the_task() -> None:
    cancelled = asyncio.Event()

    async def hang(args: dict[str, Any], meta: ToolMeta) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def boom(args: dict[str, Any], meta: ToolMeta) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("kaput")

    doc = graph([node("in", "input"), node("hang", "tool", tool="hang"), node("boom", "tool", tool="boom")],
                [("in", "hang"), ("in", "boom")])
    h = Harness(doc)
    h.tools.add("hang", hang)
    h.tools.add("boom", boom)
    outcome = await h.run()
    assert outcome.status == "failed" and outcome.code == "tool_error" and "kaput" in outcome.error
    assert cancelled.is_set()
    assert {(e.node_id, e.status) for e in h.of("node.end")} >= {("boom", "failed"), ("hang", "cancelled")}
    assert h.types()[-2:] == ["status", "done"] and h.events.events[-1].status == "failed"


async def test_on_error_continue_gives_null_and_goes_on() -> None:
    async def boom(args: dict[str, Any], meta: ToolMeta) -> None:
        raise RuntimeError("nope")

    doc = graph([node("in", "input"), node("x", "tool", tool="boom", on_error="continue"),
                 node("out", "output", value="got [{{ x }}]")], [("in", "x"), ("x", "out")])
    h = Harness(doc)
    h.tools.add("boom", boom)
    outcome = await h.run()
    assert outcome.status == "done" and outcome.output == {"out": "got []"}
    end = h.of("node.end", "x")[0]
    assert end.status == "failed" and "nope" in end.error
    assert outcome.checkpoint.nodes["x"].continued


async def test_node_timeout() -> None:
    async def hang(args: dict[str, Any], meta: ToolMeta) -> None:
        await asyncio.Event().wait()

    doc = graph([node("in", "input"), node("x", "tool", tool="hang", timeout_s=0.02)], [("in", "x")])
    h = Harness(doc)
    h.tools.add("hang", hang)
    outcome = await h.run()
    assert outcome.status == "failed" and outcome.code == "timeout" and "'x' timed out" in outcome.error


async def test_task_timeout() -> None:
    async def hang(args: dict[str, Any], meta: ToolMeta) -> None:
        await asyncio.Event().wait()

    doc = graph([node("in", "input"), node("x", "tool", tool="hang")], [("in", "x")])
    h = Harness(doc, timeout_s=0.05)
    h.tools.add("hang", hang)
    outcome = await h.run()
    assert outcome.status == "timeout" and outcome.code == "timeout"
    assert h.of("node.end", "x")[0].status == "cancelled"
    assert h.events.events[-1].type == "done" and h.events.events[-1].status == "timeout"


async def test_cancel_during_a_long_node() -> None:
    entered = asyncio.Event()
    stopped = asyncio.Event()

    async def long(args: dict[str, Any], meta: ToolMeta) -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    doc = graph([node("in", "input"), node("x", "tool", tool="long"), node("out", "output", value="x")],
                [("in", "x"), ("x", "out")])
    h = Harness(doc)
    h.tools.add("long", long)
    runner = h.make_runner()
    run = asyncio.create_task(runner.run())
    await entered.wait()
    runner.cancel("user asked")
    outcome = await run
    assert outcome.status == "cancelled" and outcome.error == "user asked"
    assert stopped.is_set()
    assert h.of("node.end", "x")[0].status == "cancelled"
    assert not h.of("node.start", "out")


async def test_budget_exceeded_stops_the_whole_graph() -> None:
    release = asyncio.Event()

    async def script(request: LLMRequest) -> str:
        if request.messages[-1]["content"] == "slow":
            await release.wait()
        return "many words " * 50

    doc = graph([node("in", "input"), node("big", "agent", prompt="big"), node("slow", "agent", prompt="slow"),
                 node("after", "agent", prompt="after")], [("in", "big"), ("in", "slow"), ("big", "after")])
    h = Harness(doc, llm=FakeLLM(script), token_budget=20)
    outcome = await h.run()
    assert outcome.status == "budget_exceeded"
    budget = h.of("budget")[0]
    assert budget.node_id == "big" and budget.limit == 20 and budget.used > 20
    assert h.of("node.end", "slow")[0].status == "cancelled"
    assert not h.of("node.start", "after")


async def test_budget_exceeded_inside_map_stops_everything() -> None:
    doc = graph([node("in", "input"), node("m", "map", items="in.xs", min_success=0,
                                          node={"kind": "agent", "config": {"prompt": "{{ item }}"}})],
                [("in", "m")])
    h = Harness(doc, llm=FakeLLM(lambda r: "word " * 30), token_budget=50, input={"xs": [1, 2, 3, 4]})
    assert (await h.run()).status == "budget_exceeded"


async def test_map_partial_failure_reports_each_item() -> None:
    async def picky(args: dict[str, Any], meta: ToolMeta) -> str:
        if args["v"] == "2":
            raise ValueError("two is bad")
        return args["v"]

    doc = graph([node("in", "input"), node("m", "map", items="in.xs", min_success=2,
                                          node={"kind": "tool", "config": {"tool": "picky",
                                                                           "args": {"v": "{{ item }}"}}}),
                 node("out", "output", value="{{ json(m) }}")], [("in", "m"), ("m", "out")])
    h = Harness(doc, input={"xs": [1, 2, 3]})
    h.tools.add("picky", picky)
    outcome = await h.run()
    assert outcome.status == "done"
    results = outcome.checkpoint.nodes["m"].output
    assert [r["ok"] for r in results] == [True, False, True]
    assert "two is bad" in results[1]["error"] and results[2]["value"] == "3"


async def test_map_total_failure_lists_every_error() -> None:
    async def bad(args: dict[str, Any], meta: ToolMeta) -> str:
        raise ValueError(f"bad {args['v']}")

    body = {"kind": "tool", "config": {"tool": "bad", "args": {"v": "{{ item }}"}}}
    doc = graph([node("in", "input"), node("m", "map", items="in.xs", node=body)], [("in", "m")])
    h = Harness(doc, input={"xs": ["a", "b"]})
    h.tools.add("bad", bad)
    outcome = await h.run()
    assert outcome.status == "failed" and outcome.code == "map_failed"
    assert "0 of 2" in outcome.error and "bad a" in outcome.error and "bad b" in outcome.error


async def test_template_error_names_node_and_expression() -> None:
    doc = graph([node("in", "input"), node("x", "agent", prompt="Hi {{ in.missing.deeper }}")], [("in", "x")])
    outcome = await Harness(doc).run()
    assert outcome.status == "failed" and outcome.code == "template"
    assert "'x'" in outcome.error and "config.prompt" in outcome.error and "in.missing.deeper" in outcome.error


async def test_event_numbers_are_gapless_and_status_first_and_last() -> None:
    doc = graph([node("in", "input"), node("out", "output", value="x")], [("in", "out")])
    h = Harness(doc)
    await h.run()
    assert [e.n for e in h.events.events] == list(range(1, len(h.events.events) + 1))
    assert h.events.events[0].type == "status" and h.events.events[0].status == "running"
    assert h.events.events[0].chain_revision == 1 and h.events.events[0].prompt_versions == {"support_system": 3}
    assert h.events.events[-1].type == "done" and h.events.events[-1].output == {"out": "x"}
