"""The offline model's intents, tool calls and answers from tool results: deterministic, from the
words of the request (no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.dispatcher.llm.offline import offline_answer
from services.dispatcher.llm.offline_tools import answer_from_tools, plan_steps, tool_call

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}}
         for n in ("kb_search", "memory_upsert", "memory_list", "code_exec")]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(("text", "name", "args"), [
    ("Search the handbook kb for vacation policy", "kb_search", {"kb": "handbook", "query": "vacation policy"}),
    ("look up refunds in the kb docs", "kb_search", {"kb": "docs", "query": "refunds"}),
    ("Remember that my favourite colour is blue", "memory_upsert", {"key": "favourite_colour", "value": "blue"}),
    ("What do you remember about me?", "memory_list", {}),
    ("Please compute 12*(3+4)", "code_exec", {"code": "print(12*(3+4))"}),
    ("what is 2^10?", "code_exec", {"code": "print(2**10)"}),
])
def test_a_request_becomes_the_tool_call_it_asks_for(text: str, name: str, args: dict[str, Any]) -> None:
    assert tool_call(user(text), TOOLS) == ("offline_call_1", name, args)


def test_no_call_without_the_tool_offered_or_an_intent_and_none_twice_in_a_turn() -> None:
    assert tool_call(user("Please compute 12*(3+4)"), TOOLS[:1]) is None
    assert tool_call(user("What is Agentix?"), TOOLS) is None
    assert tool_call(user("Please compute 12*(3+4)"), None) is None
    called = [*user("Please compute 12*(3+4)"),
              {"role": "assistant", "content": None, "tool_calls": [
                  {"id": "offline_call_1", "type": "function", "function": {"name": "code_exec", "arguments": "{}"}}]},
              {"role": "tool", "tool_call_id": "offline_call_1",
               "content": json.dumps({"ok": True, "result": {"stdout": "84\n"}})}]
    assert tool_call(called, TOOLS) is None
    assert answer_from_tools(called) == offline_answer(called, False) == "The result is 84."


def test_a_refused_call_and_a_failed_one_are_said_plainly() -> None:
    def after(reply: dict[str, Any]) -> str | None:
        return answer_from_tools([*user("compute 1+1"), {"role": "assistant", "tool_calls": [
            {"id": "c", "function": {"name": "code_exec", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": json.dumps(reply)}])

    assert after({"ok": False, "error": {"code": "rejected", "message": "no"}}) == \
        "You declined the code_exec call, so I did not run it."
    assert after({"ok": False, "error": {"code": "timeout", "message": "too slow"}}) == \
        "The code_exec call failed: too slow"


def test_a_plan_request_answers_json_steps() -> None:
    system = 'Make a short plan. Answer only with JSON of this shape: {"steps": ["what to do first"]}'
    messages = [{"role": "system", "content": system}, *user("Search the handbook kb for vacation")]
    assert json.loads(offline_answer(messages, True)) == {"steps": plan_steps(messages)}
    assert plan_steps(messages) == ["Search the knowledge base handbook for vacation",
                                    "Answer: Search the handbook kb for vacation"]
    assert plan_steps(user("What is Agentix?"))[0] == "Understand the request: What is Agentix?"
