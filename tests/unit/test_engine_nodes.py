"""One test (at least) per node kind, run through the compiler and runner in memory."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from services.dispatcher.llm.api import LLMError, LLMRequest
from shared.contract.tools import ToolMeta
from tests.unit.engine_fakes import FakeLLM, Harness, graph, node, tool_call


def line(*middle: dict[str, Any], out: str = "{{ x }}") -> dict[str, Any]:
    """in → middle… → out (a chain)."""
    nodes = [node("in", "input"), *middle, node("out", "output", value=out)]
    ids = [n["id"] for n in nodes]
    return graph(nodes, list(itertools.pairwise(ids)))


async def test_input_passes_the_task_input_and_checks_the_schema() -> None:
    schema = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
    doc = graph([{"id": "in", "kind": "input", "config": {"schema": schema}},
                 node("out", "output", value="{{ in.text }}")], [("in", "out")])
    good = await Harness(doc, input={"text": "hi"}).run()
    assert good.status == "done" and good.output == {"out": "hi"}
    h = Harness(doc, input={"text": 5})
    bad = await h.run()
    assert bad.status == "failed" and bad.code == "bad_input" and "text" in (bad.error or "")
    assert h.of("node.end", "in")[0].status == "failed"


async def test_retriever_calls_kb_search_and_renders_chunks_as_text() -> None:
    h = Harness(line(node("x", "retriever", kb="hb", query="{{ in.q }}", top_k=2)), input={"q": "vacation"})
    seen: list[tuple[dict[str, Any], ToolMeta]] = []

    async def kb_search(args: dict[str, Any], meta: ToolMeta) -> dict[str, Any]:
        seen.append((args, meta))
        return {"chunks": [{"text": "Ten days.", "score": 0.9}, {"text": "Ask HR.", "score": 0.5}]}

    h.tools.add("kb_search", kb_search, inject=("user_id",))
    outcome = await h.run()
    assert outcome.output == {"out": "Ten days.\n\nAsk HR."}
    args, meta = seen[0]
    assert args == {"kb": "hb", "query": "vacation", "top_k": 2, "mode": "hybrid", "user_id": "u1"}
    assert meta.node_id == "x" and meta.task_id == "t1"
    assert [e.type for e in h.events.events if e.node_id == "x"] == ["node.start", "tool.call", "tool.result",
                                                                      "node.end"]


async def test_agent_streams_tokens_and_uses_system_and_prompts() -> None:
    doc = line(node("x", "agent", system="{{ prompts.support_system }}", prompt="Q: {{ in.q }}", model="m1"))
    h = Harness(doc, input={"q": "why"})
    outcome = await h.run()
    assert outcome.output == {"out": "Q: why"}
    request = h.llm.requests[0]
    assert request.messages == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Q: why"}]
    assert request.model == "m1"
    assert "".join(e.text for e in h.of("token", "x")).strip() == "Q: why"
    end = h.of("node.end", "x")[0]
    assert end.usage is not None and end.usage.completion_tokens == 2
    assert outcome.usage.total_tokens == end.usage.total_tokens


async def test_agent_json_output_parses_and_bad_json_fails() -> None:
    doc = line(node("x", "agent", prompt="give json", output="json"), out="{{ x.n }}")
    ok = await Harness(doc, llm=FakeLLM(lambda r: '```json\n{"n": 4}\n```')).run()
    assert ok.output == {"out": "4"}
    bad = await Harness(doc, llm=FakeLLM(lambda r: "not json")).run()
    assert bad.status == "failed" and bad.code == "bad_output"


async def test_agent_with_tools_runs_the_agent_runner() -> None:
    def script(request: LLMRequest) -> Any:
        if request.messages[-1]["role"] == "tool":
            return "It is " + json.loads(request.messages[-1]["content"])["temp"]
        return tool_call("weather", city="Oslo")

    h = Harness(line(node("x", "agent", prompt="weather?", tools=["weather"])), llm=FakeLLM(script),
                check_tools=True)

    async def weather(args: dict[str, Any], meta: ToolMeta) -> dict[str, Any]:
        return {"temp": f"3C in {args['city']}"}

    h.tools.add("weather", weather)
    outcome = await h.run()
    assert outcome.output == {"out": "It is 3C in Oslo"}
    assert [e.node_id for e in h.of("tool.call")] == ["x"]


async def test_agent_model_error_fails_the_node() -> None:
    async def boom(request: LLMRequest) -> str:
        raise LLMError("unavailable", "every model is down")

    outcome = await Harness(line(node("x", "agent", prompt="hi")), llm=FakeLLM(boom)).run()
    assert outcome.status == "failed" and outcome.code == "unavailable" and "every model is down" in outcome.error


async def test_tool_node_renders_string_args_only() -> None:
    h = Harness(line(node("x", "tool", tool="store", args={"title": "T {{ in.n }}", "n": 5, "deep": ["{{ in.n }}"]})),
                input={"n": 7})

    async def store(args: dict[str, Any], meta: ToolMeta) -> dict[str, Any]:
        return {"saved": args}

    h.tools.add("store", store)
    outcome = await h.run()
    # `{{ x }}` alone in an output value keeps the tool's object as JSON (not its text)
    assert outcome.output["out"] == {"saved": {"title": "T 7", "n": 5, "deep": ["7"]}}


async def test_tool_error_fails_with_its_message() -> None:
    h = Harness(line(node("x", "tool", tool="store")))

    async def store(args: dict[str, Any], meta: ToolMeta) -> None:
        raise ValueError("disk full")

    h.tools.add("store", store)
    outcome = await h.run()
    assert outcome.status == "failed" and outcome.code == "tool_error" and "disk full" in outcome.error


async def test_branch_emits_the_chosen_handle() -> None:
    doc = graph([node("in", "input"), node("b", "branch", cases=[{"handle": "big", "when": "in.n > 10"},
                                                                  {"handle": "mid", "when": "in.n > 5"}]),
                 node("o1", "output", value="big"), node("o2", "output", value="mid")],
                [("in", "b"), ("b", "o1", "big"), ("b", "o2", "mid")])
    h = Harness(doc, input={"n": 7})
    outcome = await h.run()
    assert outcome.output == {"o2": "mid"}
    assert [e.handle for e in h.of("branch")] == ["mid"]


async def test_map_runs_every_item_with_item_and_index() -> None:
    doc = line(node("x", "map", items="{{ in.xs }}", concurrency=2,
                    node={"kind": "agent", "config": {"prompt": "{{ index }}:{{ item }}"}}), out="{{ json(x) }}")
    outcome = await Harness(doc, input={"xs": ["a", "b", "c"]}).run()
    assert json.loads(outcome.output["out"]) == [{"ok": True, "value": f"{i}:{v}"} for i, v in enumerate("abc")]


async def test_map_bounds_its_concurrency() -> None:
    active = peak = 0

    async def slow(args: dict[str, Any], meta: ToolMeta) -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return args["v"]

    h = Harness(line(node("x", "map", items="in.xs", concurrency=3,
                          node={"kind": "tool", "config": {"tool": "slow", "args": {"v": "{{ item }}"}}})),
                input={"xs": list(range(10))})
    h.tools.add("slow", slow)
    outcome = await h.run()
    assert outcome.status == "done" and peak == 3


async def test_map_items_must_be_a_list() -> None:
    doc = line(node("x", "map", items="in.n", node={"kind": "agent", "config": {"prompt": "x"}}))
    outcome = await Harness(doc, input={"n": 3}).run()
    assert outcome.status == "failed" and outcome.code == "bad_items"


async def test_coordinator_decomposes_runs_experts_and_synthesises() -> None:
    async def script(request: LLMRequest) -> str:
        await asyncio.sleep(0)  # yield, so parallel experts interleave
        system = request.messages[0]["content"]
        if "Split the goal" in system:
            return json.dumps({"briefs": {"law": "check the law", "money": "count the money"}})
        if "write the final answer" in system:
            return "FINAL: " + request.messages[-1]["content"].replace("\n", " ")
        return f"{system} did: {request.messages[-1]['content']}"

    doc = line(node("x", "coordinator", goal="Open a shop in {{ in.city }}",
                    experts=[{"name": "law", "system": "lawyer"}, {"name": "money", "system": "banker"}]),
               out="{{ json(x) }}")
    h = Harness(doc, llm=FakeLLM(script), input={"city": "Oslo"})
    outcome = await h.run()
    result = json.loads(outcome.output["out"])
    assert [(e["name"], e["brief"], e["result"], e["status"]) for e in result["experts"]] == [
        ("law", "check the law", "lawyer did: check the law", "done"),
        ("money", "count the money", "banker did: count the money", "done"),
    ]
    assert result["answer"].startswith("FINAL: Goal: Open a shop in Oslo")
    assert [(e.type, e.name) for e in h.events.events if e.type.startswith("expert.")][:2] == [
        ("expert.start", "law"), ("expert.start", "money")]
    # Isolation: each expert saw only its own system prompt and brief.
    expert_calls = [r for r in h.llm.requests if r.messages[0]["content"] in ("lawyer", "banker")]
    assert all(len(r.messages) == 2 for r in expert_calls)


async def test_coordinator_summarises_long_results_and_truncates_when_summary_fails() -> None:
    def script(request: LLMRequest) -> str:
        system = request.messages[0]["content"]
        if "Split the goal" in system:
            return "no json at all"  # every expert then gets the whole goal
        if system.startswith("Summarise"):
            if "fail" in request.messages[-1]["content"][:10]:
                raise LLMError("unavailable", "down")
            return "short summary"
        if "write the final answer" in system:
            return "done"
        return ("fail" if system == "b" else "ok  ") + "x" * 3000

    doc = line(node("x", "coordinator", goal="g", experts=[{"name": "a", "system": "a"}, {"name": "b", "system": "b"}]),
               out="{{ json(x) }}")
    outcome = await Harness(doc, llm=FakeLLM(script)).run()
    experts = json.loads(outcome.output["out"])["experts"]
    assert experts[0]["brief"] == "g" and experts[0]["result"] == "short summary"
    assert len(experts[1]["result"]) == 500 and experts[1]["result"].startswith("failxxx")


async def test_coordinator_skips_and_names_a_timed_out_expert() -> None:
    release = asyncio.Event()

    async def script(request: LLMRequest) -> str:
        system = request.messages[0]["content"]
        if "Split the goal" in system:
            return json.dumps({"briefs": {"fast": "f", "slow": "s"}})
        if system == "slow":
            await release.wait()  # never released: this expert times out
        if "write the final answer" in system:
            return request.messages[-1]["content"]
        return "fast result"

    doc = line(node("x", "coordinator", goal="g", expert_timeout_s=0.05,
                    experts=[{"name": "fast", "system": "fast"}, {"name": "slow", "system": "slow"}]),
               out="{{ json(x) }}")
    h = Harness(doc, llm=FakeLLM(script))
    outcome = await h.run()
    result = json.loads(outcome.output["out"])
    assert [(e["name"], e["status"]) for e in result["experts"]] == [("fast", "done"), ("slow", "timeout")]
    assert "Timed out and skipped: slow" in result["answer"] and "fast result" in result["answer"]
    assert {(e.name, e.status) for e in h.of("expert.end")} == {("fast", "done"), ("slow", "timeout")}


async def test_dual_drafts_reviews_and_synthesises() -> None:
    def script(request: LLMRequest) -> str:
        system = request.messages[0]["content"]
        if system.startswith("Review"):
            return f"review by {request.model}"
        if system.startswith("Two assistants"):
            return f"synth by {request.model}"
        return f"draft by {request.model}"

    doc = line(node("x", "dual", prompt="{{ in.q }}", models=["m1", "m2"], synthesizer=1), out="{{ json(x) }}")
    h = Harness(doc, llm=FakeLLM(script), input={"q": "2+2?"})
    outcome = await h.run()
    assert json.loads(outcome.output["out"]) == {
        "answer": "synth by m2", "drafts": ["draft by m1", "draft by m2"], "reviews": ["review by m1", "review by m2"]}
    review_of_m2 = next(r for r in h.llm.requests if r.messages[0]["content"].startswith("Review") and r.model == "m1")
    assert "draft by m2" in review_of_m2.messages[-1]["content"]
    assert {t.node_id for t in h.of("token")} == {"x"}  # the synthesis streams


async def test_dual_with_two_rounds_revises_drafts() -> None:
    def script(request: LLMRequest) -> str:
        system = request.messages[0]["content"]
        if system.startswith("Review"):
            return "r"
        if request.messages[-1]["content"].startswith("Improve"):
            return f"v2 {request.model}"
        return f"v1 {request.model}"

    doc = line(node("x", "dual", prompt="q", models=["a", "b"], rounds=2), out="{{ json(x.drafts) }}")
    outcome = await Harness(doc, llm=FakeLLM(script)).run()
    assert json.loads(outcome.output["out"]) == ["v2 a", "v2 b"]


async def test_output_nodes_key_the_result_by_id() -> None:
    doc = graph([node("in", "input"), node("o1", "output", value={"a": "{{ in.x }}", "n": [1, "{{ in.x }}"]}),
                 node("o2", "output", value="two")], [("in", "o1"), ("in", "o2")])
    outcome = await Harness(doc, input={"x": "v"}).run()
    assert outcome.output == {"o1": {"a": "v", "n": [1, "v"]}, "o2": "two"}
    single = await Harness(graph([node("in", "input"), node("only", "output", value="x")], [("in", "only")])).run()
    assert single.output == {"only": "x"}


async def test_approval_node_parks_the_task() -> None:
    h = Harness(line(node("x", "approval", message="Ship {{ in.what }}?"), out="{{ x.decision }}"),
                input={"what": "it"})
    outcome = await h.run()
    assert outcome.status == "waiting" and outcome.waiting == ["x"]
    assert h.of("approval.request")[0].message == "Ship it?"
    assert h.types()[-1] == "status" and h.events.events[-1].status == "waiting"
