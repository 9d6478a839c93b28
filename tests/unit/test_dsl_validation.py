"""One test per validation code of DSL.md (plus the extra `bad_document`), and the shape of
problems: every problem at once, with node id / edge index."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from shared.contract.dsl import MAX_BYTES, Workflow
from shared.contract.validate import validate_dsl
from tests.unit.engine_fakes import graph, node

IN: dict[str, Any] = node("in", "input")
OUT: dict[str, Any] = node("out", "output", value="{{ in.text }}")


def ok_doc() -> dict[str, Any]:
    return copy.deepcopy(graph([IN, node("a", "agent", prompt="{{ in.text }}"), OUT], [("in", "a"), ("a", "out")]))


def codes(doc: Any) -> list[str]:
    return [p.code for p in validate_dsl(doc).errors]


def only(doc: Any, code: str) -> Any:
    result = validate_dsl(doc)
    assert [p.code for p in result.errors] == [code], result.errors
    assert result.workflow is None
    return result.errors[0]


def test_valid_document_passes_and_returns_typed_workflow() -> None:
    result = validate_dsl(ok_doc())
    assert result.ok and result.errors == []
    assert isinstance(result.workflow, Workflow)
    assert [n.kind for n in result.workflow.nodes] == ["input", "agent", "output"]


def test_docs_example_is_valid() -> None:
    doc = {
        "version": "1",
        "nodes": [
            {"id": "in", "kind": "input", "label": "Question", "config": {}},
            {"id": "kb", "kind": "retriever", "config": {"kb": "handbook", "query": "{{ in.text }}", "top_k": 5}},
            {"id": "ans", "kind": "agent",
             "config": {"prompt": "Answer {{ in.text }} from:\n{{ kb.output }}", "tools": "auto"}},
            {"id": "ok", "kind": "branch", "config": {"condition": "'cannot' not in ans.output"}},
            {"id": "rep", "kind": "tool",
             "config": {"tool": "report_store", "args": {"title": "Answer", "content": "{{ ans.output }}"}}},
            {"id": "out", "kind": "output", "config": {"value": "{{ ans.output }}"}},
        ],
        "edges": [
            {"source": "in", "target": "kb"}, {"source": "kb", "target": "ans"}, {"source": "ans", "target": "ok"},
            {"source": "ok", "target": "rep", "sourceHandle": "true"},
            {"source": "ok", "target": "out", "sourceHandle": "default"},
            {"source": "rep", "target": "out"},
        ],
    }
    assert validate_dsl(doc).ok
    assert validate_dsl(json.dumps(doc)).ok  # text is accepted too


@pytest.mark.parametrize("version", [None, "2", 1, ["1"]])
def test_bad_version(version: Any) -> None:
    doc = ok_doc()
    if version is None:
        del doc["version"]
    else:
        doc["version"] = version
    assert only(doc, "bad_version").field == "version"


def test_empty_graph() -> None:
    assert codes({"version": "1", "nodes": [], "edges": []}) == ["empty_graph"]
    assert codes({"version": "1"}) == ["empty_graph"]


@pytest.mark.parametrize("bad_id", [None, "", 7, "a b", "x" * 65, "é"])
def test_bad_node_id(bad_id: Any) -> None:
    doc = ok_doc()
    doc["nodes"].append({"id": bad_id, "kind": "output", "config": {"value": "x"}} if bad_id is not None
                        else {"kind": "output", "config": {"value": "x"}})
    problem = only(doc, "bad_node_id")
    assert problem.field == "nodes[3].id"


def test_duplicate_node_id() -> None:
    doc = ok_doc()
    doc["nodes"].append(node("a", "output", value="x"))
    assert only(doc, "duplicate_node_id").node_id == "a"


def test_unknown_kind() -> None:
    doc = ok_doc()
    doc["nodes"][1]["kind"] = "wizard"
    problem = only(doc, "unknown_kind")
    assert problem.node_id == "a" and "wizard" in problem.message


@pytest.mark.parametrize(("kind", "config", "field"), [
    ("agent", {}, "config.prompt"),
    ("agent", {"prompt": 3}, "config.prompt"),
    ("agent", {"prompt": "x", "max_steps": 0}, "config.max_steps"),
    ("retriever", {"query": "q"}, "config.kb"),
    ("tool", {"args": {}}, "config.tool"),
    ("branch", {}, "config"),
    ("branch", {"condition": "true", "cases": [{"handle": "a", "when": "true"}]}, "config"),
    ("map", {"items": "in.list"}, "config.node"),
    ("map", {"items": "in.list", "node": {"kind": "branch", "config": {}}}, "config.node"),
    ("coordinator", {"goal": "g", "experts": []}, "config.experts"),
    ("dual", {"prompt": "p", "models": ["a"]}, "config.models"),
    ("output", {}, "config.value"),
    ("approval", {"timeout_s": -1}, "config.timeout_s"),
    ("agent", {"prompt": "x", "on_error": "explode"}, "config.on_error"),
])
def test_bad_config(kind: str, config: dict[str, Any], field: str) -> None:
    doc = ok_doc()
    doc["nodes"][1] = node("a", kind, **config)
    problem = only(doc, "bad_config")
    assert problem.node_id == "a"
    assert problem.field.startswith(field)


def test_bad_config_invalid_input_schema() -> None:
    doc = ok_doc()
    doc["nodes"][0] = {"id": "in", "kind": "input", "config": {"schema": {"type": "no-such-type"}}}
    assert only(doc, "bad_config").field == "config.schema"


def test_dangling_edge() -> None:
    doc = ok_doc()
    doc["edges"].append({"source": "a", "target": "ghost"})
    problem = only(doc, "dangling_edge")
    assert problem.edge_index == 2 and "ghost" in problem.message


def test_self_loop() -> None:
    doc = ok_doc()
    doc["edges"].append({"source": "a", "target": "a"})
    assert only(doc, "self_loop").edge_index == 2


def test_cycle_names_the_nodes_of_one_cycle() -> None:
    doc = graph([IN, node("a", "agent", prompt="x"), node("b", "agent", prompt="y"), OUT],
                [("in", "a"), ("a", "b"), ("b", "a"), ("b", "out")])
    problem = only(doc, "cycle")
    assert "a -> b -> a" in problem.message


@pytest.mark.parametrize("count", [0, 2])
def test_input_count(count: int) -> None:
    nodes = [node(f"in{i}", "input") for i in range(count)] + [node("out", "output", value="x")]
    edges = [("in0", "out")] + ([("in1", "out")] if count == 2 else [])
    assert codes(graph(nodes, edges if count else [])) == ["input_count"]


def test_unreachable() -> None:
    doc = ok_doc()
    doc["nodes"].append(node("lost", "output", value="x"))
    assert only(doc, "unreachable").node_id == "lost"


def test_bad_handle_on_branch_and_non_branch() -> None:
    doc = graph([IN, node("b", "branch", condition="in.x"), node("y", "output", value="1"),
                 node("z", "output", value="2")],
                [("in", "b"), ("b", "y", "maybe"), ("b", "z", "true")])
    problem = only(doc, "bad_handle")
    assert problem.edge_index == 1 and problem.node_id == "b"
    doc = ok_doc()
    doc["edges"][0]["sourceHandle"] = "true"
    assert only(doc, "bad_handle").edge_index == 0
    doc["edges"][0]["sourceHandle"] = None  # null / "" mean no handle
    assert validate_dsl(doc).ok


def test_branch_edge_without_handle_is_bad_handle() -> None:
    doc = graph([IN, node("b", "branch", cases=[{"handle": "hi", "when": "true"}]), OUT],
                [("in", "b"), ("b", "out")])
    assert only(doc, "bad_handle").edge_index == 1


def test_unknown_reference_missing_and_not_upstream() -> None:
    doc = graph([IN, node("a", "agent", prompt="{{ ghost }}"), node("b", "agent", prompt="{{ c.output }}"),
                 node("c", "agent", prompt="x"), OUT],
                [("in", "a"), ("in", "b"), ("b", "c"), ("a", "out")])
    result = validate_dsl(doc)
    assert [(p.code, p.node_id) for p in result.errors] == [("unknown_reference", "a"), ("unknown_reference", "b")]
    assert "ghost" in result.errors[0].message and "not upstream" in result.errors[1].message


def test_item_only_in_map_body() -> None:
    doc = ok_doc()
    doc["nodes"][1]["config"]["prompt"] = "{{ item }}"
    assert only(doc, "unknown_reference").field == "config.prompt"
    doc["nodes"][1] = node("a", "map", items="in.list", node={"kind": "agent", "config": {"prompt": "{{ item }}"}})
    assert validate_dsl(doc).ok


def test_bad_template() -> None:
    doc = ok_doc()
    doc["nodes"][1]["config"]["prompt"] = "{{ in.text "
    assert only(doc, "bad_template").field == "config.prompt"
    doc["nodes"][1] = node("a", "branch", condition="in.x ==")
    doc["edges"][1]["sourceHandle"] = "true"
    assert only(doc, "bad_template").field == "config.condition"


def test_too_large_nodes_edges_and_bytes() -> None:
    doc = ok_doc()
    doc["nodes"] += [node(f"n{i}", "output", value="x") for i in range(500)]
    assert codes(doc) == ["too_large"]
    doc = ok_doc()
    doc["edges"] += [{"source": "in", "target": "a"}] * 2001
    assert codes(doc) == ["too_large"]
    doc = ok_doc()
    doc["nodes"][1]["config"]["prompt"] = "x" * MAX_BYTES
    assert codes(doc) == ["too_large"]
    assert codes(b" " * (MAX_BYTES + 1)) == ["too_large"]


@pytest.mark.parametrize("raw", [None, 3, "not json", "[1]", [], True, b"\xff", {"nodes": "x", "version": "1"}])
def test_bad_document(raw: Any) -> None:
    assert "bad_document" in codes(raw)


def test_every_problem_is_reported_at_once() -> None:
    doc = {
        "version": "9",
        "nodes": [IN, node("a", "agent"), node("a", "tool", tool="x"), node("k", "zap"),
                  node("t", "tool", tool="x", args={"v": "{{ nope }}"})],
        "edges": [{"source": "in", "target": "zz"}, {"source": "t", "target": "t"},
                  {"source": "in", "target": "t", "sourceHandle": "h"}],
    }
    found = set(codes(doc))
    assert {"bad_version", "bad_config", "duplicate_node_id", "unknown_kind", "dangling_edge", "self_loop",
            "bad_handle", "unknown_reference"} <= found


def test_warnings_do_not_fail() -> None:
    doc = ok_doc()
    doc["nodes"][1]["config"]["colour"] = "red"
    doc["edges"].append({"source": "in", "target": "a"})
    result = validate_dsl(doc)
    assert result.ok
    assert {w.code for w in result.warnings} == {"unknown_field", "duplicate_edge"}


def test_the_gateway_validates_a_document_once_and_an_invalid_one_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.gateway import dsl as gateway_dsl
    from services.gateway.problems import ApiProblem

    calls: list[Any] = []

    def counted(raw: Any) -> Any:
        calls.append(raw)
        return validate_dsl(raw)

    monkeypatch.setattr(gateway_dsl, "validate_dsl", counted)
    monkeypatch.setattr(gateway_dsl, "_valid", type(gateway_dsl._valid)())
    doc = graph([node("in", "input"), node("out", "output", value="{{ in.text }}")], [("in", "out")])
    first = gateway_dsl.check_dsl(doc)
    again = gateway_dsl.check_dsl(copy.deepcopy(doc))  # an equal document, other objects
    assert first == again and len(calls) == 1
    changed = copy.deepcopy(doc)
    changed["nodes"][1]["config"]["value"] = "{{ in.other }}"
    gateway_dsl.check_dsl(changed)
    assert len(calls) == 2
    broken = {**doc, "version": "0"}
    for _ in range(2):
        with pytest.raises(ApiProblem):
            gateway_dsl.check_dsl(broken)
    assert len(calls) == 4
