"""The offline model: used when no model endpoint is configured (embedded mode, tests).

It never pretends to be a language model — it is named `offline` in events and usage — but
its answers are deterministic and useful, built from the prompt:
- plain text: the context sentences most relevant to the question (extractive answer);
- JSON for the evaluation judge, the tier-2 guardrail, the coordinator (a list of briefs,
  one per expert named in the prompt), a plan (`{"steps": [...]}`), and a structured echo for
  any other JSON request;
- tool calls when tools are offered and the request asks for one, then an answer from the
  tool's result (`offline_tools.py`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from services.dispatcher.llm.offline_tools import answer_from_tools, plan_steps
from services.dispatcher.llm.tokens import content_text

_WORD = re.compile(r"[A-Za-z0-9À-ÿ]+")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its this that "
    "these those what which who whom whose when where why how do does did can could should would will shall "
    "may might must i you he she we they me him her us them my your our their not no yes please answer "
    "question using use based following given about into than then there here also just only any all some "
    "each per via".split()
)
INJECTION_PHRASES = (
    "ignore previous instructions",
    "ignore all previous",
    "ignore the above",
    "disregard previous",
    "disregard all prior",
    "reveal your system prompt",
    "print your system prompt",
    "show your system prompt",
    "you are now dan",
    "jailbreak",
    "developer mode",
    "act as an unrestricted",
    "without any restrictions",
    "exfiltrate",
    "send me the api key",
    "reveal the api key",
    "bypass your",
    "override your instructions",
)
REFUSAL_PHRASES = ("i cannot", "i can't", "i am unable", "i'm unable", "i won't", "as an ai", "i'm sorry, but")


def words(text: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS and len(w) > 1]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


def _texts(messages: list[dict[str, Any]], role: str) -> list[str]:
    return [content_text(m.get("content")) for m in messages if m.get("role") == role]


def _question(user: str) -> str:
    asked = [s for s in sentences(user) if s.endswith("?")]
    if asked:
        return asked[-1]
    lines = [ln.strip() for ln in user.splitlines() if ln.strip()]
    return lines[0] if lines else ""


def relevant_sentences(question: str, context: str, limit: int = 3) -> list[str]:
    qwords = set(words(question))
    scored: list[tuple[float, int, str]] = []
    for i, s in enumerate(dict.fromkeys(sentences(context))):
        if s == question or (question and question in s):
            continue
        sw = words(s)
        if not sw:
            continue
        overlap = len(qwords & set(sw))
        if overlap:
            scored.append((overlap / math.sqrt(len(sw)), i, s))
    best = sorted(scored, key=lambda t: (-t[0], t[1]))[:limit]
    return [s for _, _, s in sorted(best, key=lambda t: t[1])]


def text_answer(messages: list[dict[str, Any]]) -> str:
    from_tools = answer_from_tools(messages)
    if from_tools is not None:
        return from_tools
    users = _texts(messages, "user") + _texts(messages, "tool")
    last_user = next((t for t in reversed(_texts(messages, "user")) if t.strip()), "")
    question = _question(last_user)
    context = "\n".join(users + _texts(messages, "system"))
    picked = relevant_sentences(question, context)
    if picked:
        return " ".join(picked)
    if question:
        return f"Offline model (no model endpoint configured), no matching context for: {question}"
    return "Offline model (no model endpoint configured): nothing to answer."


# ---------------------------------------------------------------- JSON tasks


def judge_answer(prompt: str) -> dict[str, Any]:
    """Scores an answer by simple evidence: non-empty, not a refusal, shares words with the
    question and (when given) the context."""
    sections = _sections(prompt)
    answer = sections.get("answer", "")
    question = sections.get("question", "")
    context = sections.get("context", "")
    if not answer.strip():
        return {"score": 0.0, "critique": "The answer is empty."}
    if any(p in answer.lower() for p in REFUSAL_PHRASES):
        return {"score": 0.3, "critique": "The answer refuses instead of answering."}
    aw = set(words(answer))
    reference = set(words(question)) | set(words(context))
    overlap = len(aw & reference) / max(1, min(len(aw), 12)) if reference else 0.5
    score = round(min(1.0, 0.5 + 0.5 * overlap), 2)
    critique = (
        "The answer addresses the question."
        if score >= 0.7
        else ("The answer shares little with the question and context; answer the question directly.")
    )
    return {"score": score, "critique": critique}


def guardrail_answer(prompt: str) -> dict[str, Any]:
    text = _sections(prompt).get("input", prompt).lower()
    for phrase in INJECTION_PHRASES:
        if phrase in text:
            return {"action": "block", "reason": f"prompt injection: contains '{phrase}'"}
    return {"action": "allow", "reason": "no injection or abuse pattern found"}


SECTION_LABELS = frozenset(
    {"question", "answer", "context", "input", "goal", "criteria", "experts", "instructions", "task", "tools"}
)


def _sections(prompt: str) -> dict[str, str]:
    """Blocks introduced by a line `Name:` (e.g. `Question:` / `Answer:` / `Context:`)."""
    out: dict[str, str] = {}
    current: str | None = None
    for line in prompt.splitlines():
        m = re.match(r"^\s*([A-Za-z][A-Za-z _-]{0,30}):\s*(.*)$", line)
        if m and m.group(1).strip().lower() in SECTION_LABELS:
            current = m.group(1).strip().lower()
            out[current] = m.group(2)
        elif current is not None:
            out[current] += "\n" + line
    return {k: v.strip() for k, v in out.items()}


def expert_names(prompt: str) -> list[tuple[str, str]]:
    """(name, description) of the experts named in a coordinator prompt: a JSON list of
    objects with `name`, or bullet lines `- name: description`."""
    for blob in _json_blobs(prompt):
        if isinstance(blob, list) and blob and all(isinstance(x, dict) and "name" in x for x in blob):
            return [(str(x["name"]), str(x.get("system") or x.get("description") or "")) for x in blob]
    found = re.findall(r"(?m)^\s*[-*•]\s*([A-Za-z0-9_][\w .-]{0,40}?)\s*[:—–-]\s+(.+)$", prompt)
    return [(n.strip(), d.strip()) for n, d in found]


def coordinator_answer(prompt: str) -> list[dict[str, str]]:
    sections = _sections(prompt)
    goal = (sections.get("goal") or "").strip().split("\n")[0] or _question(prompt)
    return [
        {"name": name, "brief": f"{goal.strip()} — from the point of view of {name}" + (f" ({desc})" if desc else "")}
        for name, desc in expert_names(prompt)
    ]


def _json_blobs(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    found: list[Any] = []
    for m in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict | list) and value:
            found.append(value)
    return found


def _fill(shape: Any, answer: str) -> Any:
    if isinstance(shape, dict):
        return {k: _fill(v, answer) for k, v in shape.items()}
    if isinstance(shape, list):
        return [_fill(shape[0], answer)] if shape else []
    if isinstance(shape, bool):
        return shape
    if isinstance(shape, int | float):
        return shape
    return answer


def json_answer(messages: list[dict[str, Any]]) -> Any:
    system = "\n".join(_texts(messages, "system"))
    user = "\n".join(_texts(messages, "user"))
    prompt = f"{system}\n{user}"
    low = system.lower()
    if "evaluation judge" in low:
        return judge_answer(user)
    if "input guardrail" in low:
        return guardrail_answer(user)
    if "plan" in low and '"steps"' in system:
        return {"steps": plan_steps(messages)}
    if "brief" in prompt.lower() and expert_names(prompt):
        return coordinator_answer(prompt)
    answer = text_answer(messages)
    shapes = [b for b in _json_blobs(prompt) if isinstance(b, dict)]
    if shapes:
        return _fill(shapes[-1], answer)
    return {"answer": answer}


def offline_answer(messages: list[dict[str, Any]], json_output: bool) -> str:
    if json_output:
        return json.dumps(json_answer(messages), ensure_ascii=False)
    return text_answer(messages)


def stream_pieces(text: str) -> list[str]:
    """Word-sized pieces, like a model's token stream."""
    return re.findall(r"\s*\S+|\s+$", text) or ([text] if text else [])
