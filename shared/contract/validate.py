"""DSL validation, shared by the gateway (before publishing) and the dispatcher (before running).

`validate_dsl` takes any value (parsed JSON, or the raw text/bytes) and lists every problem at
once, each with a stable code (DSL.md) and the node id / edge index it concerns. It never raises.
Beyond DSL.md's codes it uses `bad_document` for a document that is not a JSON object or has a
`nodes`/`edges` member or an entry of the wrong type.
"""

from __future__ import annotations

import json
import marshal
import re
from collections import defaultdict, deque
from typing import Any, cast

from pydantic import Field, ValidationError

from shared.contract.base import Contract
from shared.contract.cycles import cycles
from shared.contract.dsl import (
    DSL_VERSION,
    MAX_BYTES,
    MAX_EDGES,
    MAX_NODE_ID,
    MAX_NODES,
    NODE_KINDS,
    NODE_MODELS,
    BranchNode,
    Edge,
    Node,
    NodeBase,
    Workflow,
)
from shared.contract.templates import FUNCTIONS, ITEM_NAMES, SCOPE_NAMES, TemplateProblem, compile_field

_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")
RESERVED_IDS = SCOPE_NAMES | ITEM_NAMES | FUNCTIONS.keys()


class Problem(Contract):
    code: str
    message: str
    node_id: str | None = None
    edge_index: int | None = None
    field: str | None = None


class ValidationResult(Contract):
    errors: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    workflow: Workflow | None = None

    @property
    def ok(self) -> bool:
        return not self.errors


class _Collector:
    def __init__(self) -> None:
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    def error(self, code: str, message: str, **where: Any) -> None:
        self.errors.append(Problem(code=code, message=message, **where))

    def warn(self, code: str, message: str, **where: Any) -> None:
        self.warnings.append(Problem(code=code, message=message, **where))


MAX_KEY_BYTES = 1024 * 1024


def document_key(doc: Any) -> bytes | None:
    """A cache key of a parsed document (a DSL): equal keys mean equal documents; None when it
    cannot have one (not plain data, or over MAX_KEY_BYTES).

    The key is the document in `marshal` format 2: C speed (a JSON dump took a quarter of a
    small graph's whole run), refuses anything but plain data, and round-trips exactly, so equal
    keys mean equal documents (no false hit); format 2 has no back-references, so equal documents
    give equal keys whatever objects they share. Key order matters, which only costs a miss."""
    try:
        key = marshal.dumps(doc, 2)
    except (ValueError, RecursionError):  # not plain data, or nested past the limit (a cycle)
        return None
    return key if len(key) <= MAX_KEY_BYTES else None


def validate_dsl(raw: Any) -> ValidationResult:
    out = _Collector()
    try:
        workflow = _validate(raw, out)
    except Exception as exc:  # a validator bug must never turn bad input into a 500
        out.error("bad_document", f"the document could not be validated: {type(exc).__name__}: {exc}")
        workflow = None
    return ValidationResult(errors=out.errors, warnings=out.warnings, workflow=workflow if not out.errors else None)


def parse_checked(raw: dict[str, Any]) -> Workflow:
    """The workflow of a document already found valid where it was submitted: its nodes and
    edges as `validate_dsl` would give them, none of the rules checked again. Raises (ValueError,
    KeyError, TypeError, a pydantic ValidationError) when the document does not even parse: a
    caller then validates it, for the reasons."""
    nodes = []
    for item in raw["nodes"]:
        config = item.get("config")
        body = {"id": item["id"], "kind": item["kind"], "label": item.get("label"),
                "config": {} if config is None else config}
        nodes.append(NODE_MODELS[item["kind"]].model_validate(body))
    edges: list[Edge] = []
    seen: set[tuple[str, str, str | None]] = set()
    for item in raw.get("edges", []):
        key = (item["source"], item["target"], item.get("sourceHandle") or None)
        if key not in seen:  # a repeated edge is dropped, as the validator drops it
            seen.add(key)
            edges.append(Edge(source=key[0], target=key[1], source_handle=key[2]))
    return Workflow.model_construct(version=DSL_VERSION, nodes=cast("list[Node]", nodes), edges=edges)


def _size(raw: Any) -> int | None:
    try:
        return len(json.dumps(raw, ensure_ascii=False, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError):
        return None


def _validate(raw: Any, out: _Collector) -> Workflow | None:
    if isinstance(raw, (bytes, bytearray, str)):
        if len(raw) > MAX_BYTES:
            out.error("too_large", f"the document is larger than {MAX_BYTES} bytes")
            return None
        try:
            raw = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            out.error("bad_document", f"the document is not valid JSON: {exc}")
            return None
    if not isinstance(raw, dict):
        out.error("bad_document", f"the document must be a JSON object, not {_type_name(raw)}")
        return None
    size = _size(raw)
    if size is None:
        out.error("bad_document", "the document is not plain JSON (or is nested too deeply)")
        return None
    nodes_raw, edges_raw = raw.get("nodes"), raw.get("edges", [])
    too_large = False
    if size > MAX_BYTES:
        out.error("too_large", f"the document is {size} bytes; the limit is {MAX_BYTES}")
        too_large = True
    if isinstance(nodes_raw, list) and len(nodes_raw) > MAX_NODES:
        out.error("too_large", f"{len(nodes_raw)} nodes; the limit is {MAX_NODES}", field="nodes")
        too_large = True
    if isinstance(edges_raw, list) and len(edges_raw) > MAX_EDGES:
        out.error("too_large", f"{len(edges_raw)} edges; the limit is {MAX_EDGES}", field="edges")
        too_large = True
    if too_large:  # do not spend unbounded work on an oversized document
        return None

    version = raw.get("version")
    if version != DSL_VERSION:
        what = "missing" if version is None else f"{version!r} is not supported"
        out.error("bad_version", f"version {what}; use \"{DSL_VERSION}\"", field="version")

    if nodes_raw is None or nodes_raw == []:
        out.error("empty_graph", "the graph has no nodes", field="nodes")
        nodes_raw = []
    elif not isinstance(nodes_raw, list):
        out.error("bad_document", f"`nodes` must be a list, not {_type_name(nodes_raw)}", field="nodes")
        nodes_raw = []
    if not isinstance(edges_raw, list):
        out.error("bad_document", f"`edges` must be a list, not {_type_name(edges_raw)}", field="edges")
        edges_raw = []

    nodes, kinds = _check_nodes(nodes_raw, out)
    inputs = [nid for nid, kind in kinds.items() if kind == "input"]
    if kinds and len(inputs) != 1:
        out.error("input_count", f"the graph needs exactly one input node, found {len(inputs)}"
                  + (f": {', '.join(inputs)}" if inputs else ""))
    edges, succ = _check_edges(edges_raw, kinds, nodes, out)
    acyclic = _check_cycles(succ, kinds, out)
    if len(inputs) == 1 and acyclic:
        _check_reachable(inputs[0], succ, kinds, out)
    _check_templates(nodes, succ, kinds, out)
    if kinds and not any(kind == "output" for kind in kinds.values()):
        out.warn("no_output", "the graph has no output node; the task result will be empty")

    if out.errors:
        return None
    # Every parsed node is an instance of one of NODE_MODELS, i.e. one member of the `Node` union.
    return Workflow.model_construct(version=DSL_VERSION, nodes=cast("list[Node]", list(nodes.values())), edges=edges)


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _check_nodes(nodes_raw: list[Any], out: _Collector) -> tuple[dict[str, NodeBase], dict[str, str]]:
    """Returns the nodes that parsed (by id) and the kind of every node with a usable id."""
    parsed: dict[str, NodeBase] = {}
    kinds: dict[str, str] = {}
    for index, item in enumerate(nodes_raw):
        where = f"nodes[{index}]"
        if not isinstance(item, dict):
            out.error("bad_document", f"{where} must be an object, not {_type_name(item)}", field=where)
            continue
        node_id = item.get("id")
        if not isinstance(node_id, str) or not node_id or len(node_id) > MAX_NODE_ID or not _ID_RE.match(node_id):
            shown = node_id if isinstance(node_id, str) else None
            out.error("bad_node_id", f"{where}: id {_describe_id(node_id)} is not valid: use 1-{MAX_NODE_ID} "
                      "characters of A-Z a-z 0-9 _ -", node_id=shown, field=f"{where}.id")
            continue
        if node_id in kinds:
            out.error("duplicate_node_id", f"{where}: node id {node_id!r} is used twice", node_id=node_id,
                      field=f"{where}.id")
            continue
        if node_id in RESERVED_IDS:
            out.warn("reserved_id", f"node id {node_id!r} is also a template name; templates read that name, "
                     "not this node", node_id=node_id)
        kind = item.get("kind")
        if not isinstance(kind, str) or kind not in NODE_KINDS:
            out.error("unknown_kind", f"node {node_id!r}: kind {kind!r} is not one of {', '.join(NODE_KINDS)}",
                      node_id=node_id, field=f"{where}.kind")
            kinds[node_id] = "?"
            continue
        kinds[node_id] = kind
        node = _parse_node(node_id, kind, item, where, out)
        if node is not None:
            parsed[node_id] = node
    return parsed, kinds


def _describe_id(node_id: Any) -> str:
    if node_id is None:
        return "(missing)"
    if isinstance(node_id, str):
        return repr(node_id if len(node_id) <= 70 else node_id[:67] + "...")
    return f"of type {_type_name(node_id)}"


def _parse_node(node_id: str, kind: str, item: dict[str, Any], where: str, out: _Collector) -> NodeBase | None:
    model = NODE_MODELS[kind]
    config = item.get("config")
    body = {"id": node_id, "kind": kind, "label": item.get("label"), "config": {} if config is None else config}
    try:
        node = model.model_validate(body)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc = ".".join(str(p) for p in err["loc"])
            detail = err["msg"].removeprefix("Value error, ")
            if err["type"] == "missing":
                detail = "required"
            elif "expected" in (err.get("ctx") or {}):
                detail = f"{detail} (expected {err['ctx']['expected']})"
            out.error("bad_config", f"node {node_id!r}: {loc}: {detail}", node_id=node_id, field=loc)
        return None
    if isinstance(config, dict):
        known = set(model.model_fields["config"].annotation.model_fields)  # type: ignore[union-attr]
        known |= {"schema"}
        for key in config:
            if key not in known:
                out.warn("unknown_field", f"node {node_id!r}: config.{key} is not used by {kind} nodes",
                         node_id=node_id, field=f"config.{key}")
    if kind == "input" and node.config.schema_ is not None:  # type: ignore[attr-defined]
        problem = _schema_problem(node.config.schema_)  # type: ignore[attr-defined]
        if problem:
            out.error("bad_config", f"node {node_id!r}: config.schema is not a valid JSON Schema: {problem}",
                      node_id=node_id, field="config.schema")
            return None
    return node


def _schema_problem(schema: dict[str, Any]) -> str | None:
    from jsonschema import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return str(exc.message)
    return None


def _check_edges(
    edges_raw: list[Any], kinds: dict[str, str], nodes: dict[str, NodeBase], out: _Collector
) -> tuple[list[Edge], dict[str, list[str]]]:
    edges: list[Edge] = []
    succ: dict[str, list[str]] = defaultdict(list)
    seen: set[tuple[str, str, str | None]] = set()
    for index, item in enumerate(edges_raw):
        if not isinstance(item, dict):
            out.error("bad_document", f"edges[{index}] must be an object, not {_type_name(item)}",
                      edge_index=index, field=f"edges[{index}]")
            continue
        source = _edge_end(index, "source", item.get("source"), kinds, out)
        target = _edge_end(index, "target", item.get("target"), kinds, out)
        handle = item.get("sourceHandle")
        if handle == "":
            handle = None
        if source is None or target is None:
            continue
        if handle is not None and not isinstance(handle, str):
            out.error("bad_handle", f"edges[{index}]: sourceHandle must be a string", edge_index=index,
                      node_id=source, field="sourceHandle")
            continue
        if source == target:
            out.error("self_loop", f"edges[{index}]: node {source!r} points to itself", edge_index=index,
                      node_id=source)
            continue
        if not _check_handle(index, source, handle, kinds, nodes, out):
            succ[source].append(target)  # still part of the shape: no knock-on unreachable/reference errors
            continue
        key = (source, target, handle)
        if key in seen:
            out.warn("duplicate_edge", f"edges[{index}] repeats an earlier edge", edge_index=index)
            continue
        seen.add(key)
        edges.append(Edge(source=source, target=target, source_handle=handle))
        succ[source].append(target)
    return edges, succ


def _edge_end(index: int, end: str, value: Any, kinds: dict[str, str], out: _Collector) -> str | None:
    """`value` if it names a node; otherwise the error is reported and the answer is None."""
    if isinstance(value, str) and value in kinds:
        return value
    shown = "missing" if value is None else f"{value!r}"
    out.error("dangling_edge", f"edges[{index}]: {end} {shown} is not a node", edge_index=index, field=end)
    return None


def _check_handle(index: int, source: str, handle: str | None, kinds: dict[str, str],
                  nodes: dict[str, NodeBase], out: _Collector) -> bool:
    if kinds[source] != "branch":
        if handle is not None:
            out.error("bad_handle", f"edges[{index}]: node {source!r} is {_article(kinds[source])} node and has no "
                      f"handle {handle!r}", edge_index=index, node_id=source, field="sourceHandle")
            return False
        return True
    node = nodes.get(source)
    if not isinstance(node, BranchNode):
        return True  # its config is already reported as bad
    handles = node.config.handles()
    if handle is None or handle not in handles:
        what = "no sourceHandle" if handle is None else f"handle {handle!r}"
        out.error("bad_handle", f"edges[{index}]: branch {source!r} has {what}; it can produce "
                  f"{', '.join(sorted(handles))}", edge_index=index, node_id=source, field="sourceHandle")
        return False
    return True


def _article(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _check_cycles(succ: dict[str, list[str]], kinds: dict[str, str], out: _Collector) -> bool:
    """One `cycle` problem per strongly connected component."""
    components = cycles(succ, kinds)
    for component in components:
        cycle = _one_cycle(component, succ)
        out.error("cycle", f"the graph has a cycle: {' -> '.join([*cycle, cycle[0]])}", node_id=cycle[0])
    return not components


def _one_cycle(component: list[str], succ: dict[str, list[str]]) -> list[str]:
    members = set(component)
    path: list[str] = []
    position: dict[str, int] = {}
    node = min(component)
    while node not in position:
        position[node] = len(path)
        path.append(node)
        node = next(n for n in succ.get(node, ()) if n in members)
    return path[position[node]:]


def _check_reachable(start: str, succ: dict[str, list[str]], kinds: dict[str, str], out: _Collector) -> None:
    seen = {start}
    queue = deque([start])
    while queue:
        for child in succ.get(queue.popleft(), ()):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    for node_id in kinds:
        if node_id not in seen:
            out.error("unreachable", f"node {node_id!r} cannot be reached from the input node {start!r}",
                      node_id=node_id)


class Ancestors(dict[str, frozenset[str]]):
    """Upstream nodes of each node, computed on first use (reverse reachability, so it also
    terminates on cyclic graphs)."""

    def __init__(self, succ: dict[str, list[str]]) -> None:
        super().__init__()
        self._pred: dict[str, list[str]] = defaultdict(list)
        for source, targets in succ.items():
            for target in targets:
                self._pred[target].append(source)

    def __missing__(self, node: str) -> frozenset[str]:
        seen: set[str] = set()
        queue = deque(self._pred.get(node, ()))
        while queue:
            current = queue.popleft()
            if current not in seen:
                seen.add(current)
                queue.extend(self._pred.get(current, ()))
        self[node] = result = frozenset(seen)
        return result


def _check_templates(nodes: dict[str, NodeBase], succ: dict[str, list[str]], kinds: dict[str, str],
                     out: _Collector) -> None:
    upstream = Ancestors(succ)
    for node_id, node in nodes.items():
        for tf in node.template_fields():
            try:
                names = compile_field(tf.source, tf.mode).names
            except TemplateProblem as exc:
                out.error("bad_template", f"node {node_id!r} {tf.path}: {exc.message}", node_id=node_id,
                          field=tf.path)
                continue
            allowed = SCOPE_NAMES | ITEM_NAMES if tf.item_scope else SCOPE_NAMES
            for name in sorted(names - allowed):
                if name not in kinds:
                    hint = " (item/index exist only inside a map node's body)" if name in ITEM_NAMES else ""
                    out.error("unknown_reference", f"node {node_id!r} {tf.path}: no node named {name!r}{hint}",
                              node_id=node_id, field=tf.path)
                elif name not in upstream[node_id]:
                    out.error("unknown_reference", f"node {node_id!r} {tf.path}: node {name!r} is not upstream "
                              "of this node", node_id=node_id, field=tf.path)
