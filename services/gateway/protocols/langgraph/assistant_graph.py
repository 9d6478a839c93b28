"""An assistant's graph as LangGraph draws it, from the DSL it runs (a saved workflow's, or the
chat mode's): `GET /assistants/{id}/graph` (nodes and edges between `__start__` and `__end__`),
`/schemas` (input from the input node's JSON Schema, output and state from the nodes) and
`/subgraphs` (a DSL graph nests none: a map's body and a coordinator's experts are drawn inside
their node with `xray`)."""

from __future__ import annotations

from typing import Any, Final

START: Final = "__start__"
END: Final = "__end__"
_ANY_OBJECT: Final = {"type": "object"}
_MESSAGES: Final[dict[str, Any]] = {"type": "array", "title": "Messages", "items": {
    "type": "object", "required": ["content"],
    "properties": {"type": {"type": "string", "enum": ["human", "user"]}, "role": {"type": "string"},
                   "content": {"anyOf": [{"type": "string"}, {"type": "array"}]}}}}
MESSAGES_SCHEMA: Final = {
    "type": "object", "title": "input", "required": ["messages"],
    "properties": {"messages": _MESSAGES},
}
CHAT_CONFIG_SCHEMA: Final = {
    "type": "object", "title": "configurable",
    "properties": {"mode": {"type": "string", "enum": ["direct", "react", "plan"]},
                   "model": {"type": "string", "description": "a model the gateway knows (GET /api/v1/models)"}},
}
WORKFLOW_CONFIG_SCHEMA: Final = {"type": "object", "title": "configurable", "properties": {}}


def _node(node: dict[str, Any]) -> dict[str, Any]:
    kind = node.get("kind", "node")
    return {"id": node["id"], "type": "runnable",
            "data": {"id": ["agentix", "dsl", kind], "name": node.get("label") or node["id"]},
            "metadata": {"kind": kind}}


def _inner(node: dict[str, Any]) -> list[dict[str, Any]]:
    """What `xray` shows inside a node: a map's body, a coordinator's experts."""
    config = node.get("config") or {}
    if node.get("kind") == "map" and isinstance(config.get("node"), dict):
        body = config["node"]
        return [{"id": f"{node['id']}:{body.get('kind', 'body')}", "type": "runnable",
                 "data": {"id": ["agentix", "dsl", body.get("kind", "body")], "name": body.get("kind", "body")},
                 "metadata": {"kind": body.get("kind"), "parent": node["id"]}}]
    if node.get("kind") == "coordinator":
        return [{"id": f"{node['id']}:{expert['name']}", "type": "runnable",
                 "data": {"id": ["agentix", "dsl", "expert"], "name": expert["name"]},
                 "metadata": {"kind": "expert", "parent": node["id"]}}
                for expert in config.get("experts") or [] if isinstance(expert, dict) and "name" in expert]
    return []


def graph(dsl: dict[str, Any], xray: bool | int = False) -> dict[str, list[dict[str, Any]]]:
    """`{nodes, edges}` as the SDK's `get_graph` answers; a branch's edges are `conditional`
    and carry their case's handle as `data`."""
    nodes = [n for n in dsl.get("nodes") or [] if isinstance(n, dict) and "id" in n]
    edges = [e for e in dsl.get("edges") or [] if isinstance(e, dict)]
    kinds = {n["id"]: n.get("kind") for n in nodes}
    drawn: list[dict[str, Any]] = [{"id": START, "type": "schema", "data": START}]
    out: list[dict[str, Any]] = []
    for node in nodes:
        drawn.append(_node(node))
        if xray:
            for inner in _inner(node):
                drawn.append(inner)
                out.append({"source": node["id"], "target": inner["id"], "conditional": False})
                out.append({"source": inner["id"], "target": node["id"], "conditional": False})
    drawn.append({"id": END, "type": "schema", "data": END})
    targets = {e.get("target") for e in edges}
    sources = {e.get("source") for e in edges}
    head = [{"source": START, "target": n["id"], "conditional": False} for n in nodes if n["id"] not in targets]
    for edge in edges:
        handle = edge.get("sourceHandle") or edge.get("source_handle")
        item: dict[str, Any] = {"source": edge.get("source"), "target": edge.get("target"),
                                "conditional": kinds.get(edge.get("source")) == "branch"}
        if handle:
            item["data"] = handle
        out.append(item)
    tail = [{"source": n["id"], "target": END, "conditional": False} for n in nodes if n["id"] not in sources]
    return {"nodes": drawn, "edges": head + out + tail}


def input_schema(dsl: dict[str, Any]) -> dict[str, Any]:
    for node in dsl.get("nodes") or []:
        if isinstance(node, dict) and node.get("kind") == "input":
            schema = (node.get("config") or {}).get("schema")
            return {**_ANY_OBJECT, **schema} if isinstance(schema, dict) else dict(_ANY_OBJECT)
    return dict(_ANY_OBJECT)


def _node_ids(dsl: dict[str, Any], kind: str | None = None) -> list[str]:
    return [n["id"] for n in dsl.get("nodes") or []
            if isinstance(n, dict) and "id" in n and (kind is None or n.get("kind") == kind)]


def workflow_schemas(graph_id: str, dsl: dict[str, Any]) -> dict[str, Any]:
    """A workflow's input is its input node's schema; its output (and `values`) are the node outputs."""
    outputs = _node_ids(dsl, "output")
    return {
        "graph_id": graph_id,
        "input_schema": {"title": "input", **input_schema(dsl)},
        "output_schema": {"type": "object", "title": "output", "properties": {o: {} for o in outputs}},
        "state_schema": {"type": "object", "title": "state", "properties": {n: {} for n in _node_ids(dsl)}},
        "config_schema": WORKFLOW_CONFIG_SCHEMA,
        "context_schema": WORKFLOW_CONFIG_SCHEMA,
    }


def chat_schemas(graph_id: str) -> dict[str, Any]:
    """The chat agent's input and state are `{messages}`; its config picks the mode and model."""
    state = {"type": "object", "title": "state", "properties": {"messages": _MESSAGES}}
    return {"graph_id": graph_id, "input_schema": MESSAGES_SCHEMA, "output_schema": state, "state_schema": state,
            "config_schema": CHAT_CONFIG_SCHEMA, "context_schema": CHAT_CONFIG_SCHEMA}
