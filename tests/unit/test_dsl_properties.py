"""Property tests: garbled or random DSL never crashes the validator; generated valid DAGs
always pass (and compile)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.dispatcher.engine.compile import compile_plan
from shared.contract.validate import ValidationResult, validate_dsl

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
KINDS = ["agent", "tool", "output", "branch", "approval", "retriever", "map", "dual", "coordinator"]


@st.composite
def valid_dags(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(min_value=1, max_value=14))
    ids = ["in"] + [f"n{i}" for i in range(1, count)]
    kinds = ["input"] + [draw(st.sampled_from(KINDS)) for _ in range(1, count)]
    edges: list[dict[str, Any]] = []
    preds: dict[int, set[int]] = {0: set()}
    for i in range(1, count):
        chosen = draw(st.sets(st.integers(min_value=0, max_value=i - 1), min_size=1, max_size=3))
        preds[i] = chosen
        for j in sorted(chosen):
            edge: dict[str, Any] = {"source": ids[j], "target": ids[i]}
            if kinds[j] == "branch":
                edge["sourceHandle"] = draw(st.sampled_from(["true", "false", "default"]))
            edges.append(edge)

    def upstream(i: int) -> list[str]:
        seen: set[int] = set()
        stack = list(preds[i])
        while stack:
            j = stack.pop()
            if j not in seen:
                seen.add(j)
                stack.extend(preds[j])
        return [ids[j] for j in sorted(seen)]

    nodes: list[dict[str, Any]] = [{"id": "in", "kind": "input", "config": {}}]
    for i in range(1, count):
        ref = draw(st.sampled_from(upstream(i)))
        text = f"Use {{{{ {ref}.output }}}} and {{{{ input.q }}}}"
        config: dict[str, Any] = {
            "agent": {"prompt": text},
            "tool": {"tool": "t", "args": {"a": text, "n": 3}},
            "output": {"value": text},
            "branch": {"condition": f"'x' in {ref}"},
            "approval": {"message": text, "timeout_s": 5},
            "retriever": {"kb": "k", "query": text},
            "map": {"items": f"{ref} | list", "node": {"kind": "agent", "config": {"prompt": "{{ item }} " + text}}},
            "dual": {"prompt": text, "models": ["a", "b"]},
            "coordinator": {"goal": text, "experts": [{"name": "e", "system": "s"}]},
        }[kinds[i]]
        if draw(st.booleans()):
            config["on_error"] = "continue"
        nodes.append({"id": ids[i], "kind": kinds[i], "label": draw(st.text(max_size=5)), "config": config})
    order = draw(st.permutations(range(count)))
    return {"version": "1", "nodes": [nodes[i] for i in order], "edges": draw(st.permutations(edges))}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_dags())
def test_generated_valid_dags_pass(doc: dict[str, Any]) -> None:
    result = validate_dsl(doc)
    assert result.ok, result.errors
    plan = compile_plan(doc)
    assert len(plan.order) == len(doc["nodes"])
    position = {node_id: i for i, node_id in enumerate(plan.order)}
    assert all(position[e["source"]] < position[e["target"]] for e in doc["edges"])


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_random_json_never_crashes(raw: Any) -> None:
    result = validate_dsl(raw)
    assert isinstance(result, ValidationResult)
    assert not any("could not be validated" in p.message for p in result.errors)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_random_text_never_crashes(raw: Any) -> None:
    result = validate_dsl(raw)
    assert not result.ok or result.workflow is not None


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, sub in value.items():
            out += _paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            out += _paths(sub, (*prefix, index))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_dags(), st.data())
def test_garbled_documents_never_crash(doc: dict[str, Any], data: st.DataObject) -> None:
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(json_values)
    result = validate_dsl(doc)
    assert isinstance(result, ValidationResult)
    assert all(p.code and p.message for p in result.errors)
    assert not any("could not be validated" in p.message for p in result.errors)  # no internal error
