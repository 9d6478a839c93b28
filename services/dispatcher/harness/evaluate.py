"""Evaluation of an agent's answer (when the node sets `evaluate`): rules + LLM judge +
faithfulness to the retrieved chunks → score in [0, 1] and grade ok / warn / poor.
On `poor` the answer is regenerated once with the critique.

    final, outcome = await Evaluator().run(llm, request, result, chunks=[...], budget=b, on_delta=sink)
    await emit(outcome.event(task_id, node_id))
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from services.dispatcher.llm.api import LLM, BudgetExceeded, DeltaSink, LLMError, LLMRequest, LLMResult, TokenBudget
from services.dispatcher.llm.offline import REFUSAL_PHRASES, sentences, words
from services.dispatcher.llm.tokens import content_text
from shared.contract.events import EvalEvent
from shared.contract.models import Usage

log = logging.getLogger("agentix.harness.evaluate")
Grade = Literal["ok", "warn", "poor"]
JUDGE_SYSTEM = (
    "You are an evaluation judge. Rate how well the answer serves the question: correct, complete, "
    "relevant, and grounded in the context when a context is given. Reply with only a JSON object: "
    '{"score": a number from 0 to 1, "critique": "what is wrong and how to fix it, or \\"fine\\""}'
)
MAX_CONTEXT_CHARS = 12_000


@dataclass
class EvalOutcome:
    score: float
    grade: Grade
    reasons: list[str] = field(default_factory=list)
    critique: str = ""
    regenerated: bool = False
    usage: Usage = field(default_factory=Usage)  # of the judge calls

    def event(self, task_id: str, node_id: str | None = None) -> EvalEvent:
        return EvalEvent(
            task_id=task_id,
            node_id=node_id,
            score=self.score,
            grade=self.grade,
            regenerated=self.regenerated,
            reasons=self.reasons,
        )


def faithfulness(answer: str, chunks: Sequence[str]) -> float:
    """Share of the answer's substantive sentences whose content words mostly occur in the
    chunks (lexical support; 1.0 when there is nothing to check)."""
    support = set()
    for chunk in chunks:
        support.update(words(chunk))
    checked = supported = 0
    for sentence in sentences(answer):
        sw = set(words(sentence))
        if len(sw) < 3:
            continue
        checked += 1
        if len(sw & support) / len(sw) >= 0.6:
            supported += 1
    return 1.0 if checked == 0 else supported / checked


def _judge_reply(text: str) -> tuple[float, str] | None:
    match = re.search(r"\{.*\}", text, re.S)
    if not match:
        return None
    try:
        data = json.loads(match.group(0))
        score = float(data["score"])
    except (ValueError, KeyError, TypeError):
        return None
    if score > 1.0 and score <= 10.0:  # some judges answer on a 0–10 scale
        score /= 10.0
    return max(0.0, min(1.0, score)), str(data.get("critique") or "")


class Evaluator:
    def __init__(
        self,
        *,
        ok_at: float = 0.7,
        poor_below: float = 0.4,
        min_words: int = 2,
        max_chars: int = 20_000,
        use_judge: bool = True,
    ) -> None:
        self.ok_at = ok_at
        self.poor_below = poor_below
        self.min_words = min_words
        self.max_chars = max_chars
        self.use_judge = use_judge

    def grade(self, score: float) -> Grade:
        return "ok" if score >= self.ok_at else "poor" if score < self.poor_below else "warn"

    def rules(self, answer: str, *, json_expected: bool, finish_reason: str | None) -> tuple[float, list[str]]:
        """(cap on the score, reasons) from cheap checks."""
        text = answer.strip()
        if not text:
            return 0.0, ["empty answer"]
        cap, reasons = 1.0, []
        if json_expected:
            try:
                json.loads(text)
            except json.JSONDecodeError:
                return 0.1, ["answer is not valid JSON"]
        low = text.lower()
        if any(low.startswith(p) or f"\n{p}" in low for p in REFUSAL_PHRASES):
            cap = min(cap, 0.5)
            reasons.append("answer is a refusal")
        if len(text.split()) < self.min_words and not json_expected:
            cap = min(cap, 0.6)
            reasons.append("answer is very short")
        if len(text) > self.max_chars:
            cap = min(cap, 0.8)
            reasons.append(f"answer is longer than {self.max_chars} characters")
        if finish_reason == "length":
            cap = min(cap, 0.6)
            reasons.append("answer was cut off at max_tokens")
        return cap, reasons

    async def judge(
        self, llm: LLM, question: str, answer: str, chunks: Sequence[str], budget: TokenBudget | None
    ) -> tuple[float, str, Usage] | None:
        context = "\n---\n".join(chunks)[:MAX_CONTEXT_CHARS]
        user = f"Question:\n{question}\n" + (f"Context:\n{context}\n" if context else "") + f"Answer:\n{answer}"
        request = LLMRequest(
            messages=[{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}],
            temperature=0.0,
            max_tokens=300,
            json_output=True,
            stream=False,
        )
        try:
            result = await llm.complete(request, budget=budget)
        except BudgetExceeded:
            raise
        except LLMError as exc:
            log.warning("evaluation judge failed: %s", exc)
            return None
        parsed = _judge_reply(result.text)
        if parsed is None:
            return None
        return parsed[0], parsed[1], result.usage

    async def evaluate(
        self,
        llm: LLM,
        *,
        question: str,
        answer: str,
        chunks: Sequence[str] = (),
        json_expected: bool = False,
        finish_reason: str | None = None,
        budget: TokenBudget | None = None,
    ) -> EvalOutcome:
        cap, reasons = self.rules(answer, json_expected=json_expected, finish_reason=finish_reason)
        if cap == 0.0:
            return EvalOutcome(0.0, "poor", reasons, critique="; ".join(reasons))
        usage = Usage()
        parts: list[tuple[float, float]] = []  # (score, weight)
        critique = ""
        if self.use_judge:
            judged = await self.judge(llm, question, answer, chunks, budget)
            if judged is None:
                reasons.append("judge unavailable; graded by rules only")
            else:
                score, critique, usage = judged
                parts.append((score, 0.6 if chunks else 1.0))
                if score < self.ok_at and critique:
                    reasons.append(f"judge: {critique}")
        if chunks:
            faith = faithfulness(answer, chunks)
            parts.append((faith, 0.4))
            if faith < 0.5:
                reasons.append(f"weakly supported by the retrieved chunks ({faith:.0%} of sentences)")
        base = sum(s * w for s, w in parts) / sum(w for _, w in parts) if parts else 0.75
        score = round(min(cap, base), 3)
        critique = critique if critique and critique.lower() != "fine" else "; ".join(reasons)
        return EvalOutcome(score, self.grade(score), reasons, critique, usage=usage)

    async def run(
        self,
        llm: LLM,
        request: LLMRequest,
        result: LLMResult,
        *,
        question: str | None = None,
        chunks: Sequence[str] = (),
        budget: TokenBudget | None = None,
        on_delta: DeltaSink | None = None,
        on_poor: Callable[[EvalOutcome], Awaitable[None]] | None = None,
    ) -> tuple[LLMResult, EvalOutcome]:
        """Evaluate `result`; on `poor`, regenerate once with the critique (streaming through
        `on_delta` again) and evaluate the new answer. `on_poor` hears the first evaluation
        before the regeneration starts (so a stream reader can tell the two answers apart).
        The returned result's usage covers the answer(s) and the judge calls."""
        if question is None:
            question = next(
                (content_text(m.get("content")) for m in reversed(request.messages) if m.get("role") == "user"), ""
            )
        outcome = await self.evaluate(
            llm,
            question=question,
            answer=result.text,
            chunks=chunks,
            json_expected=request.json_output,
            finish_reason=result.finish_reason,
            budget=budget,
        )
        total = result.usage.add(outcome.usage)
        if outcome.grade != "poor":
            result.usage = total
            return result, outcome
        if on_poor is not None:
            await on_poor(outcome)
        retry_request = replace(
            request,
            messages=[
                *request.messages,
                {"role": "assistant", "content": result.text},
                {
                    "role": "user",
                    "content": "A reviewer judged this answer poor: "
                    f"{outcome.critique or 'it does not answer the request'}. "
                    "Write an improved answer to the original request.",
                },
            ],
        )
        second = await llm.complete(retry_request, budget=budget, on_delta=on_delta)
        again = await self.evaluate(
            llm,
            question=question,
            answer=second.text,
            chunks=chunks,
            json_expected=request.json_output,
            finish_reason=second.finish_reason,
            budget=budget,
        )
        again.regenerated = True
        again.reasons = [f"regenerated (first answer scored {outcome.score}: {outcome.critique})", *again.reasons]
        second.usage = total.add(second.usage).add(again.usage)
        return second, again
