"""The catalog of node kinds the canvas offers (`GET /api/v1/dsl/kinds`): per kind its label,
description, icon, handles and the JSON Schema of its `config`.

The schemas are generated from the config models of `shared.contract.dsl` (`NODE_MODELS`), the
very models `validate_dsl` checks a node against: a field added to or constrained in a model shows
in the editor's form without a second description to keep in step.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from shared.contract.dsl import NODE_KINDS, NODE_MODELS, BranchConfig

# What a person sees in the palette; everything else comes from the models. The icons are
# characters the DejaVu fonts have (no emoji font is assumed).
_PRESENTATION: Final[dict[str, tuple[str, str, str]]] = {
    "input": ("Input", "Where the task's input enters; its JSON Schema says what a run must be given.", "⇥"),
    "retriever": ("Retriever", "Searches a knowledge base (hybrid, vector, full-text or graph).", "⌕"),
    "agent": ("Agent", "A model answers a prompt, calling tools in a loop when it has any.", "✦"),
    "tool": ("Tool", "Calls one tool directly, no model involved.", "⚙"),
    "branch": ("Branch", "Chooses the outgoing edges: a condition (true/false) or cases.", "◇"),
    "map": ("Map", "Runs an agent or tool for every item of a list, bounded in parallel.", "☰"),
    "coordinator": ("Coordinator", "A lead briefs expert agents in parallel, then synthesizes.", "⚇"),
    "dual": ("Dual", "Two models answer, review each other, one synthesizes.", "⚖"),
    "approval": ("Approval", "Parks the run until a person approves or rejects.", "☑"),
    "output": ("Output", "Names what the task returns.", "⇤"),
}

# What a downstream template reads of a node of each kind (`{{ id.output }}`; DSL.md, Node kinds).
_OUTPUTS: Final[dict[str, dict[str, str]]] = {
    "retriever": {"output": "the chunks found ({chunks: [{text, score, doc_id, …}]})"},
    "agent": {"output": "the final text (or parsed JSON)"},
    "tool": {"output": "the tool's result"},
    "branch": {"output": "the chosen handle"},
    "map": {"output": "the per-item results ([{ok, value}])"},
    "coordinator": {"output": "{answer, experts: [{name, brief, result, status}]}"},
    "dual": {"output": "{answer, drafts, reviews}"},
    "approval": {"output": "{decision, comment, by, at}"},
    "output": {"output": "the value"},
    "input": {},  # the input's fields, from its schema
}

# The branch's handles when it has a `condition` (its `cases` name their own, plus this one).
DEFAULT_HANDLE: Final = "default"


def _config_model(kind: str) -> type[BaseModel]:
    annotation = NODE_MODELS[kind].model_fields["config"].annotation
    assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
    return annotation


def config_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a kind's `config`, by the names the DSL uses (`schema`, not `schema_`)."""
    return _config_model(kind).model_json_schema(by_alias=True, mode="validation")


def _condition_handles() -> list[str]:
    handles = BranchConfig(condition="true").handles() - {DEFAULT_HANDLE}
    return sorted(handles, reverse=True)  # true before false, as people read it


def kind_entry(kind: str) -> dict[str, Any]:
    label, description, icon = _PRESENTATION[kind]
    if kind == "branch":
        outputs: list[str] = _condition_handles()
    elif kind == "output":
        outputs = []
    else:
        outputs = [""]  # one unnamed output
    return {
        "kind": kind,
        "label": label,
        "description": description,
        "icon": icon,
        "inputs": 0 if kind == "input" else 1,
        "outputs": outputs,
        "case_handles": kind == "branch",
        "default_handle": DEFAULT_HANDLE if kind == "branch" else None,
        "outputs_doc": _OUTPUTS[kind],
        "config_schema": config_schema(kind),
    }


def kinds_catalog() -> list[dict[str, Any]]:
    """Every node kind, in the order of `NODE_KINDS`."""
    return [kind_entry(kind) for kind in NODE_KINDS]
