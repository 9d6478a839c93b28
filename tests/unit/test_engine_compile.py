"""The compiler: passes, the frozen plan, and `unknown_tool` against the registry."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from services.dispatcher.engine import compile as compile_module
from services.dispatcher.engine.compile import CompileError, compile_plan
from shared.contract.tools import ToolDescriptor
from tests.unit.engine_fakes import graph, node


def tools(*names: str) -> list[ToolDescriptor]:
    return [ToolDescriptor(name=n, title=n, description=n, service="go") for n in names]


DOC = graph([node("in", "input"), node("b", "branch", condition="in.x"), node("t", "tool", tool="store"),
             node("o", "output", value="{{ t.output }} {{ in.x }}")],
            [("in", "b"), ("b", "t", "true"), ("t", "o"), ("b", "o", "default")])


def test_plan_has_order_maps_handles_and_refs() -> None:
    plan = compile_plan(json.dumps(DOC))
    assert plan.order == ("in", "b", "t", "o")
    assert plan.input_id == "in" and plan.output_ids == ("o",)
    o = plan.nodes["o"]
    assert o.preds == {"t", "b"} and o.refs == {"t", "in"}
    assert plan.nodes["b"].handles == {"true", "false", "default"}
    assert plan.nodes["b"].out_handles == {"true", "default"}
    assert set(o.templates) == {"config.value"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.nodes["o"].refs = frozenset()  # type: ignore[misc]
    with pytest.raises(TypeError):
        plan.nodes["x"] = o  # type: ignore[index]


def test_invalid_dsl_raises_with_every_problem() -> None:
    with pytest.raises(CompileError) as info:
        compile_plan({"version": "1", "nodes": [node("a", "agent")]})
    assert {p.code for p in info.value.problems} == {"bad_config", "input_count"}


def test_unknown_tool_is_checked_against_the_registry() -> None:
    doc = graph([node("in", "input"), node("t", "tool", tool="store"), node("k", "retriever", kb="x", query="q"),
                 node("a", "agent", prompt="p", tools=["search", "mail"]),
                 node("m", "map", items="in.xs", node={"kind": "tool", "config": {"tool": "ghost"}}),
                 node("c", "coordinator", goal="g", experts=[{"name": "e", "system": "s", "tools": ["spy"]}])],
                [("in", "t"), ("in", "k"), ("in", "a"), ("in", "m"), ("in", "c")])
    with pytest.raises(CompileError) as info:
        compile_plan(doc, tools("store", "search"))
    found = {(p.code, p.node_id, p.field) for p in info.value.problems}
    assert found == {("unknown_tool", "k", "config.kb"), ("unknown_tool", "a", "config.tools"),
                     ("unknown_tool", "m", "config.node.config.tool"),
                     ("unknown_tool", "c", "config.experts[0].tools")}
    assert info.value.code == "unknown_tool"
    plan = compile_plan(doc, tools("store", "search", "mail", "kb_search", "ghost", "spy"))
    assert set(plan.tools or {}) >= {"store", "ghost"}


def test_auto_tools_need_no_registry_entry() -> None:
    doc = graph([node("in", "input"), node("a", "agent", prompt="p", tools="auto")], [("in", "a")])
    assert compile_plan(doc, tools()).nodes["a"].kind == "agent"


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_a_document_the_gateway_checked_is_parsed_not_validated_again(example: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """One validation per document: a task the gateway validated (`dsl_checked`) gets the plan
    the validator's workflow gives, without the validator running again in the dispatcher."""
    doc = json.loads(example.read_text())
    monkeypatch.setattr(compile_module, "_CACHE", type(compile_module._CACHE)())
    validated = compile_plan(doc)
    monkeypatch.setattr(compile_module, "_CACHE", type(compile_module._CACHE)())

    def no_validation(raw: object) -> None:
        raise AssertionError("validated a second time")

    monkeypatch.setattr(compile_module, "validate_dsl", no_validation)
    checked = compile_plan(doc, checked=True)
    assert checked == validated


def test_a_checked_document_that_does_not_parse_is_validated_for_its_reasons() -> None:
    with pytest.raises(CompileError) as info:
        compile_plan({"version": "1", "nodes": [{"id": "a"}], "edges": []}, checked=True)
    assert "unknown_kind" in {p.code for p in info.value.problems}
