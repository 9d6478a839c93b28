"""DSL → a frozen execution plan, through ordered pure passes:

1. normalise   — decode text/bytes; canonical JSON text is also the key of a small plan cache
                 (saved workflows are submitted again and again; a plan is immutable)
2. validate    — every DSL.md rule (`shared.contract.validate`); a document the gateway found
                 valid already (`checked`) is only parsed: one validation per document
3. templates   — compile every template/expression once; resolve the node ids each node reads
4. topology    — topological order, predecessor/successor maps, in/out edges, branch handle sets
5. tools       — `unknown_tool` against the registry (`list_tools`), when one is given

Any failing pass raises CompileError with every problem found by that pass.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from shared.contract.dsl import (
    AgentConfig,
    BranchNode,
    CoordinatorNode,
    MapNode,
    NodeBase,
    RetrieverNode,
    ToolConfig,
    Workflow,
)
from shared.contract.templates import ITEM_NAMES, SCOPE_NAMES, Compiled, TemplateProblem, compile_field
from shared.contract.tools import ToolDescriptor
from shared.contract.validate import Problem, document_key, parse_checked, validate_dsl
from shared.errors import AgentixError

KB_SEARCH = "kb_search"


class CompileError(AgentixError):
    """The workflow cannot run: every problem the failing pass found; `code` is the first one's."""

    http_status = 422

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = problems[0] if problems else None
        super().__init__("; ".join(p.message for p in problems[:5]) or "invalid workflow",
                         code=first.code if first else "bad_dsl")


@dataclass(frozen=True, slots=True)
class PlanEdge:
    index: int
    source: str
    target: str
    handle: str | None


@dataclass(frozen=True, slots=True)
class PlanNode:
    id: str
    kind: str
    node: NodeBase
    templates: Mapping[str, Compiled]
    refs: frozenset[str]  # node ids its templates read
    in_edges: tuple[PlanEdge, ...]
    out_edges: tuple[PlanEdge, ...]
    preds: frozenset[str]
    succs: frozenset[str]
    handles: frozenset[str] | None  # branch nodes: every handle it can produce
    out_handles: frozenset[str | None]  # handles present on its outgoing edges

    @property
    def config(self) -> Any:
        return self.node.config  # type: ignore[attr-defined]

    @property
    def timeout_s(self) -> float | None:
        return self.config.timeout_s

    @property
    def continue_on_error(self) -> bool:
        return self.config.on_error == "continue"


@dataclass(frozen=True, slots=True)
class Plan:
    workflow: Workflow
    nodes: Mapping[str, PlanNode]
    order: tuple[str, ...]
    input_id: str
    output_ids: tuple[str, ...]
    retriever_ids: frozenset[str]
    # The registry the plan was checked against (None: not checked; fetch at run time).
    tools: Mapping[str, ToolDescriptor] | None


def compile_plan(raw: Any, tools: Sequence[ToolDescriptor] | None = None, *, checked: bool = False) -> Plan:
    doc, key = _normalise(raw)
    registry_key = None if tools is None else tuple(sorted((t.name, t.agent, tuple(t.inject)) for t in tools))
    cache_key = (key, registry_key) if key is not None else None
    if cache_key is not None and (cached := _CACHE.get(cache_key)) is not None:
        _CACHE.move_to_end(cache_key)
        return cached
    workflow = _parsed(doc) if checked else None
    workflow = workflow or _validate(doc)
    templates = _templates(workflow)
    plan = _topology(workflow, templates, tools)
    if tools is not None:
        _check_tools(plan)
    if cache_key is not None:
        _CACHE[cache_key] = plan
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return plan


CACHE_SIZE = 256
_CACHE: OrderedDict[tuple[bytes, Any], Plan] = OrderedDict()


def _normalise(raw: Any) -> tuple[Any, bytes | None]:
    """The document as plain data, and its cache key (`document_key`; None when it has none)."""
    if isinstance(raw, (bytes, bytearray, str)):
        try:
            raw = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return raw, None  # the validator reports it
    return raw, document_key(raw)


def _parsed(raw: Any) -> Workflow | None:
    """A checked document's workflow; None when it does not parse (then it is validated, for the
    reasons: it cannot have been checked as it is)."""
    try:
        return parse_checked(raw)
    except Exception:
        return None


def _validate(raw: Any) -> Workflow:
    result = validate_dsl(raw)
    if result.errors or result.workflow is None:
        raise CompileError(result.errors)
    return result.workflow


def _templates(workflow: Workflow) -> dict[str, tuple[dict[str, Compiled], frozenset[str]]]:
    ids = {node.id for node in workflow.nodes}
    out: dict[str, tuple[dict[str, Compiled], frozenset[str]]] = {}
    problems: list[Problem] = []
    for node in workflow.nodes:
        compiled: dict[str, Compiled] = {}
        refs: set[str] = set()
        for tf in node.template_fields():
            try:
                item = compile_field(tf.source, tf.mode)
            except TemplateProblem as exc:  # validated already; kept for callers of this pass alone
                problems.append(Problem(code="bad_template", message=str(exc), node_id=node.id, field=tf.path))
                continue
            compiled[tf.path] = item
            refs |= (item.names - SCOPE_NAMES - ITEM_NAMES) & ids
        out[node.id] = (compiled, frozenset(refs))
    if problems:
        raise CompileError(problems)
    return out


def _topology(workflow: Workflow, templates: Mapping[str, tuple[dict[str, Compiled], frozenset[str]]],
              tools: Sequence[ToolDescriptor] | None) -> Plan:
    edges = [PlanEdge(i, e.source, e.target, e.source_handle) for i, e in enumerate(workflow.edges)]
    ins: dict[str, list[PlanEdge]] = {n.id: [] for n in workflow.nodes}
    outs: dict[str, list[PlanEdge]] = {n.id: [] for n in workflow.nodes}
    for edge in edges:
        outs[edge.source].append(edge)
        ins[edge.target].append(edge)
    # Kahn's algorithm, stable in document order.
    indegree = {node_id: len(lst) for node_id, lst in ins.items()}
    queue = deque(node_id for node_id, d in indegree.items() if d == 0)
    order: list[str] = []
    while queue:
        node_id = queue.popleft()
        order.append(node_id)
        for edge in outs[node_id]:
            indegree[edge.target] -= 1
            if indegree[edge.target] == 0:
                queue.append(edge.target)
    nodes: dict[str, PlanNode] = {}
    for node in workflow.nodes:
        compiled, refs = templates[node.id]
        nodes[node.id] = PlanNode(
            id=node.id,
            kind=node.kind,
            node=node,
            templates=MappingProxyType(compiled),
            refs=refs,
            in_edges=tuple(ins[node.id]),
            out_edges=tuple(outs[node.id]),
            preds=frozenset(e.source for e in ins[node.id]),
            succs=frozenset(e.target for e in outs[node.id]),
            handles=node.config.handles() if isinstance(node, BranchNode) else None,
            out_handles=frozenset(e.handle for e in outs[node.id]),
        )
    kinds = {n.id: n.kind for n in nodes.values()}
    return Plan(
        workflow=workflow,
        nodes=MappingProxyType(nodes),
        order=tuple(order),
        input_id=next(i for i, k in kinds.items() if k == "input"),
        output_ids=tuple(i for i in order if kinds[i] == "output"),
        retriever_ids=frozenset(i for i, k in kinds.items() if k == "retriever"),
        tools=MappingProxyType({t.name: t for t in tools}) if tools is not None else None,
    )


def _wanted_tools(node: NodeBase) -> list[tuple[str, str]]:
    """(tool name, field) pairs a node needs from the registry."""
    wanted: list[tuple[str, str]] = []

    def body(config: Any, prefix: str) -> None:
        if isinstance(config, ToolConfig):
            wanted.append((config.tool, f"{prefix}.tool"))
        elif isinstance(config, AgentConfig):
            wanted.extend((name, f"{prefix}.tools") for name in config.tool_names())

    if isinstance(node, RetrieverNode):
        wanted.append((KB_SEARCH, "config.kb"))
    elif isinstance(node, MapNode):
        body(node.config.node.config, "config.node.config")
    elif isinstance(node, CoordinatorNode):
        for index, expert in enumerate(node.config.experts):
            wanted.extend((name, f"config.experts[{index}].tools") for name in expert.tools or [])
    else:
        body(node.config, "config")  # type: ignore[attr-defined]
    return wanted


def _check_tools(plan: Plan) -> None:
    registry = plan.tools or {}
    problems = [
        Problem(code="unknown_tool", message=f"node {pn.id!r}: no tool service registers tool {name!r}",
                node_id=pn.id, field=field)
        for pn in plan.nodes.values()
        for name, field in _wanted_tools(pn.node)
        if name not in registry
    ]
    if problems:
        raise CompileError(problems)
