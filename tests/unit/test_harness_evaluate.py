"""Evaluation: rules, faithfulness, grading; the judge through the offline model."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.dispatcher.harness.evaluate import Evaluator, faithfulness
from services.dispatcher.llm.api import LLMRequest
from services.dispatcher.llm.pool import ModelPool
from shared.settings import Settings

CHUNKS = ["NATS JetStream keeps messages in streams.", "A KV bucket stores the control values."]


@pytest.mark.parametrize(
    ("answer", "json_expected", "finish", "cap", "reason"),
    [
        ("   ", False, None, 0.0, "empty answer"),
        ("{not json", True, None, 0.1, "not valid JSON"),
        ("I cannot help with that request.", False, None, 0.5, "refusal"),
        ("Yes", False, None, 0.6, "very short"),
        ("A long answer that stops", False, "length", 0.6, "cut off"),
        ('{"a": 1}', True, "stop", 1.0, None),
    ],
)
def test_rules(answer: str, json_expected: bool, finish: str | None, cap: float, reason: str | None) -> None:
    got_cap, reasons = Evaluator().rules(answer, json_expected=json_expected, finish_reason=finish)
    assert got_cap == cap
    assert (reason is None and reasons == []) or any(reason in r for r in reasons if reason)


def test_faithfulness_is_the_share_of_supported_sentences() -> None:
    assert faithfulness("JetStream keeps messages in streams. The KV bucket stores control values.", CHUNKS) == 1.0
    assert (
        faithfulness("JetStream keeps messages in streams. Bananas grow quickly in tropical climates.", CHUNKS) == 0.5
    )
    assert faithfulness("Ok.", CHUNKS) == 1.0


async def test_offline_judge_grades_a_grounded_answer_ok_and_a_refusal_lower(tmp_path: Path) -> None:
    pool = ModelPool(Settings(data_dir=tmp_path, llm_base_url=None))
    ev = Evaluator()
    good = await ev.evaluate(
        pool.pinned(),
        question="Where does JetStream keep messages?",
        answer="JetStream keeps messages in streams.",
        chunks=CHUNKS,
    )
    bad = await ev.evaluate(
        pool.pinned(),
        question="Where does JetStream keep messages?",
        answer="I cannot answer that, sorry.",
        chunks=CHUNKS,
    )
    assert good.grade == "ok" and good.score >= 0.7 and good.usage.models == ["offline"]
    assert bad.score < good.score and bad.grade != "ok" and any("refusal" in r for r in bad.reasons)
    event = good.event("t1", "ans")
    assert (event.type, event.grade, event.regenerated) == ("eval", "ok", False)
    await pool.aclose()


async def test_run_keeps_an_ok_answer_and_adds_judge_usage(tmp_path: Path) -> None:
    pool = ModelPool(Settings(data_dir=tmp_path, llm_base_url=None))
    request = LLMRequest(messages=[{"role": "user", "content": "Where does JetStream keep messages?"}])
    first = await pool.pinned().complete(
        LLMRequest(messages=[{"role": "user", "content": f"{CHUNKS[0]}\nWhere does JetStream keep messages?"}])
    )
    tokens = first.usage.total_tokens
    final, outcome = await Evaluator().run(pool.pinned(), request, first, chunks=CHUNKS)
    assert final is first and not outcome.regenerated and outcome.grade == "ok"
    assert final.usage.total_tokens > tokens  # the judge call is counted
    await pool.aclose()
