"""The offline model's tool use and plans: deterministic, from the words of the request.

When tools are offered and the request asks to search or look something up (`kb_search`), to
remember something (`memory_upsert`), to recall (`memory_list`) or to compute an arithmetic
expression (`code_exec`), the offline model calls that tool with arguments taken from the request;
once the tool's result is back it answers from it. Asked for a plan (JSON with `steps`), it gives
the steps those same intents imply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from services.dispatcher.llm.tokens import content_text

_EXPRESSION = re.compile(r"[-+(]*\d[\d.\s]*(?:(?:\*\*|[-+*/%^])[\s(]*\d[\d.\s)]*)+")
_KB_NAMED = re.compile(r"\b(?:in|from)\s+(?:the\s+)?(?:kb|knowledge base)\s+[\"']?([\w.-]+)", re.I)
_KB_IN = re.compile(r"\b(?:in|from)\s+(?:the\s+|my\s+)?([\w.-]+)\s+(?:kb|knowledge base)\b", re.I)
_REMEMBER = re.compile(r"\b(?:remember|note|keep in mind|memorize|memorise)\b(?:\s+that)?\s*(.*)", re.I | re.S)
_RECALL = re.compile(r"\b(?:recall|what do you (?:remember|know about me)|do you remember|what did i tell you)\b",
                     re.I)
_SEARCH_KB = re.compile(r"\b(?:search|look\s+in)\s+(?:the\s+|my\s+)?([\w.-]+)\s+(?:kb|knowledge base)\s+"
                        r"(?:for|about)\s+(.*)", re.I | re.S)
_SEARCH = re.compile(r"\b(?:search|look(?:\s+it)?\s+up|lookup|find)\b(?:\s+(?:for|about))?\s*(.*)", re.I | re.S)
_COMPUTE = re.compile(r"\b(?:compute|calculate|calc|evaluate|how much is|what is)\b", re.I)
DEFAULT_KB = "default"


@dataclass(frozen=True)
class Intent:
    tool: str
    args: dict[str, Any]
    step: str  # the intent as a plan step


def request_text(messages: list[dict[str, Any]]) -> str:
    """What the user asks: the last user message, or its `Request:` line when it carries a plan."""
    users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    text = next((t for t in reversed(users) if t.strip()), "")
    asked = re.search(r"(?im)^\s*request:\s*(.+)$", text)
    return asked.group(1).strip() if asked else text.strip()


def intents(text: str) -> list[Intent]:
    """The tool uses a request asks for, in a fixed order (recall, remember, search, compute)."""
    found: list[Intent] = []
    if _RECALL.search(text):
        found.append(Intent("memory_list", {}, "Recall what I remember about you"))
    elif (fact := _REMEMBER.search(text)) and fact.group(1).strip():
        key, value = _fact(fact.group(1))
        found.append(Intent("memory_upsert", {"key": key, "value": value}, f"Remember {key}: {value}"))
    if (named := _SEARCH_KB.search(text)) and named.group(2).strip():
        kb_name, query = named.group(1), named.group(2).strip(" ?.!")
        found.append(Intent("kb_search", {"kb": kb_name, "query": query},
                            f"Search the knowledge base {kb_name} for {query}"))
    elif (search := _SEARCH.search(text)) and search.group(1).strip():
        kb = _KB_NAMED.search(text) or _KB_IN.search(text)
        query = _KB_IN.sub("", _KB_NAMED.sub("", search.group(1))).strip(" ?.!")
        kb_name = kb.group(1) if kb else DEFAULT_KB
        found.append(Intent("kb_search", {"kb": kb_name, "query": query or text},
                            f"Search the knowledge base {kb_name} for {query or text}"))
    expression = _expression(text)
    if expression is not None and (_COMPUTE.search(text) or not found):
        found.append(Intent("code_exec", {"code": f"print({expression})"}, f"Compute {expression} with Python"))
    return found


def _expression(text: str) -> str | None:
    for match in _EXPRESSION.finditer(text):
        expression = " ".join(match.group(0).split()).replace("^", "**")
        if any(op in expression for op in "+-*/%") and re.search(r"\d", expression):
            return expression
    return None


def _fact(text: str) -> tuple[str, str]:
    fact = text.strip().rstrip(".!")
    subject, sep, value = re.sub(r"^(?:my|that my)\s+", "", fact, flags=re.I).partition(" is ")
    if not sep:
        subject, value = " ".join(fact.split()[:4]), fact
    key = "_".join(re.findall(r"[a-z0-9]+", subject.lower()))[:60] or "note"
    return key, value.strip() or fact


def tool_call(messages: list[dict[str, Any]],
              tools: list[dict[str, Any]] | None) -> tuple[str, str, dict[str, Any]] | None:
    """(call id, function name, arguments) of the next call to make, or None to answer now: one
    call per intent whose tool is offered and that has not been called yet in this turn."""
    if not tools:
        return None
    offered = {t.get("function", {}).get("name") for t in tools}
    done = {name for name, _ in _called(messages)}
    step = len(_called(messages))
    for intent in intents(request_text(messages)):
        if intent.tool in offered and intent.tool not in done:
            return f"offline_call_{step + 1}", intent.tool, intent.args
    return None


def _called(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(function name, call id) of every tool call made since the last user message."""
    since: list[tuple[str, str]] = []
    for message in messages:
        if message.get("role") == "user":
            since = []
        for call in message.get("tool_calls") or []:
            since.append((call.get("function", {}).get("name", ""), call.get("id", "")))
    return since


def answer_from_tools(messages: list[dict[str, Any]]) -> str | None:
    """The answer once the calls of this turn have their results (None when there are none)."""
    names = {call_id: name for name, call_id in _called(messages)}
    if not names:
        return None
    parts: list[str] = []
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") in names:
            parts.append(_say(names[message["tool_call_id"]], content_text(message.get("content"))))
    return " ".join(p for p in parts if p) or None


def _say(tool: str, content: str) -> str:
    try:
        reply = json.loads(content)
    except ValueError:
        return f"{tool} returned: {content[:300]}"
    if not isinstance(reply, dict) or not reply.get("ok", False):
        error = reply.get("error") if isinstance(reply, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if code == "rejected":
            return f"You declined the {tool} call, so I did not run it."
        message = error.get("message") if isinstance(error, dict) else str(reply)
        return f"The {tool} call failed: {message}"
    result = reply.get("result")
    if tool == "code_exec" and isinstance(result, dict):
        out = str(result.get("stdout") or "").strip()
        return f"The result is {out}." if out else f"The code ran: {json.dumps(result)[:300]}"
    if tool == "memory_upsert" and isinstance(result, dict):
        return f"I will remember that {result.get('key')}: {_plain(result.get('value'))}."
    if tool == "memory_list" and isinstance(result, dict):
        items = result.get("items") or []
        facts = "; ".join(f"{i.get('key')}: {_plain(i.get('value'))}" for i in items if isinstance(i, dict))
        return f"I remember: {facts}." if facts else "I do not remember anything about you yet."
    if tool == "kb_search" and isinstance(result, dict):
        texts = [str(c.get("text", "")).strip() for c in result.get("chunks") or [] if isinstance(c, dict)]
        texts = [t for t in texts if t]
        return f"From the knowledge base: {' '.join(texts[:3])}" if texts else "The knowledge base had nothing on that."
    return f"{tool} returned: {json.dumps(result, ensure_ascii=False, default=str)[:300]}"


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def plan_steps(messages: list[dict[str, Any]]) -> list[str]:
    """A plan for the request: one step per tool use it asks for, then the answer."""
    text = request_text(messages)
    steps = [i.step for i in intents(text)]
    question = " ".join(text.split())[:200]
    return [*steps, f"Answer: {question}"] if steps else [f"Understand the request: {question}",
                                                         "Answer it from what is known"]
