"""The built-in graph of each chat mode, made of ordinary node kinds; a run that folds older
turns into the running summary gets a summarize node first (see `memory.py`)."""

from __future__ import annotations

import itertools
from typing import Any, Final, Literal

from services.gateway.chat.memory import SUMMARY_NODE, SUMMARY_OUTPUT, SUMMARY_SYSTEM, answer_history

Mode = Literal["direct", "react", "plan"]
MODES: Final = ("direct", "react", "plan")
REACT_MAX_STEPS: Final = 8
ANSWER_NODE: Final = "ans"  # the agent whose output is the run's answer, in every mode
OUTPUT_NODE: Final = "answer"
PLAN_NODE: Final = "plan"

CHAT_SYSTEM = ("You are a helpful assistant in a conversation. Answer the user's last message; "
               "earlier turns are context. When you use a tool's result, say where it came from.")
PLAN_SYSTEM = ('Make a short plan to answer the user\'s last message with the available tools. '
               'Answer only with JSON of this shape: {"steps": ["what to do first", "what to do next"]}')
# A conversation's knowledge base. Its name reaches templates as `input.kb`, never spliced into
# one (a name is the user's text, not a template).
KB_SYSTEM = ("\n\nThe user's knowledge base is {{ input.kb }}: search it with the kb_search tool "
             "(it searches there unless you name another kb) for what the user asks about, and cite the "
             "sources you use by their title, as [title].")
# ... and kb_search takes it when the model names no kb.
KB_DEFAULTS: Final = {"kb_search": {"kb": "{{ input.kb }}"}}
GROUNDED_SYSTEM = ("\n\nAnswer from the sources given with the user's message when they hold the answer, "
                   "and cite each source you use by its title, as [title]. Say so when they do not.")
SOURCES_NODE: Final = "sources"
GROUNDED_PROMPT = ("Sources from the knowledge base {{ input.kb }}:\n"
                   f"{{% for c in {SOURCES_NODE}.chunks %}}[{{{{ c.title }}}}] {{{{ c.text }}}}\n{{% endfor %}}"
                   "\nMessage: {{ in.text }}")
EXECUTE_PROMPT = ("Carry out this approved plan to answer the request, then give the answer.\n"
                  "Request: {{ in.text }}\nPlan: {{ json(plan.steps) }}")

_IN: Final = {"id": "in", "kind": "input", "config": {"schema": {
    "type": "object", "required": ["text"],
    "properties": {"text": {"type": "string"}, "history": {"type": "array"}}}}}
_OUT: Final = {"id": OUTPUT_NODE, "kind": "output", "config": {"value": "{{ ans }}"}}
# Folding never fails the turn: a failed summary is null, and the answer goes on without it.
_SUMMARIZE: Final = {"id": SUMMARY_NODE, "kind": "agent", "config": {
    "system": SUMMARY_SYSTEM, "prompt": "{{ input.fold.prompt }}", "on_error": "continue"}}
_SUMMARY_OUT: Final = {"id": SUMMARY_OUTPUT, "kind": "output", "config": {"value": f"{{{{ {SUMMARY_NODE} or '' }}}}"}}


def _agent(node_id: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "kind": "agent", "config": {"system": CHAT_SYSTEM, "history": "{{ input.history }}",
                                                        "prompt": "{{ in.text }}", **config}}


def _chain(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"version": "1", "nodes": list(nodes),
            "edges": [{"source": a["id"], "target": b["id"]} for a, b in itertools.pairwise(nodes)]}


def _steps(mode: str, kb: bool) -> list[dict[str, Any]]:
    if mode == "direct":
        if not kb:
            return [_agent(ANSWER_NODE)]
        # No tools to search with: the answer is grounded by a search made for it first.
        search = {"id": SOURCES_NODE, "kind": "retriever",
                  "config": {"kb": "{{ input.kb }}", "query": "{{ in.text }}", "top_k": 5}}
        return [search, _agent(ANSWER_NODE, system=CHAT_SYSTEM + GROUNDED_SYSTEM, prompt=GROUNDED_PROMPT)]
    system = CHAT_SYSTEM + KB_SYSTEM if kb else CHAT_SYSTEM
    defaults = {"tool_defaults": KB_DEFAULTS} if kb else {}
    if mode == "react":
        return [_agent(ANSWER_NODE, system=system, tools="auto", max_steps=REACT_MAX_STEPS, **defaults)]
    if mode == "plan":
        plan = _agent(PLAN_NODE, system=PLAN_SYSTEM + KB_SYSTEM if kb else PLAN_SYSTEM, output="json")
        approval = {"id": "approve", "kind": "approval",
                    "config": {"message": "Approve this plan?\n{{ json(plan.steps) }}", "plan": "{{ plan.steps }}"}}
        execute = _agent(ANSWER_NODE, system=system, prompt=EXECUTE_PROMPT, tools="auto", max_steps=REACT_MAX_STEPS,
                         **defaults)
        return [plan, approval, execute]
    raise ValueError(f"unknown chat mode {mode!r}")


def graph_for(mode: str, *, fold: bool = False, kb: bool = False) -> dict[str, Any]:
    """The DSL of a chat run in `mode` (input `{text, history, kb?}`, see `memory.Memory.task_input`).
    `fold`: the run first folds older turns into the running summary, which its agents then see.
    `kb`: the conversation has a knowledge base (`input.kb`): the agents are told to search it and
    cite their sources; in `direct` mode (no tools) a search grounds the answer instead."""
    steps = _steps(mode, kb)
    if not fold:
        return _chain(_IN, *steps, _OUT)
    for step in steps:
        if step["kind"] == "agent":
            step["config"]["history"] = answer_history()
    graph = _chain(_IN, _SUMMARIZE, *steps, _OUT)
    graph["nodes"].append(_SUMMARY_OUT)
    graph["edges"].append({"source": SUMMARY_NODE, "target": SUMMARY_OUTPUT})
    return graph
