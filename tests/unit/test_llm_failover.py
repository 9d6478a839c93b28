"""The failover chain as a composition: members behind the `LLM` interface, tried in order;
breaker notices come back on the result or on the error that ends the call."""

from __future__ import annotations

import pytest

from services.dispatcher.llm.api import (
    BudgetExceeded,
    DeltaSink,
    LLMError,
    LLMRequest,
    LLMResult,
    ModelNotice,
    TokenBudget,
)
from services.dispatcher.llm.chain_config import PinnedConfig
from services.dispatcher.llm.failover import FailoverLLM
from services.dispatcher.llm.model import ModelFailed
from shared.contract.models import ModelChain, ModelConfig, Pricing

REQUEST = LLMRequest(messages=[{"role": "user", "content": "hi"}])


def skipped(name: str) -> ModelFailed:
    why = f"model {name!r} skipped: its circuit breaker is open"
    failed = ModelFailed("unavailable", why, attempts=0)
    failed.notices.append(ModelNotice("model_skipped", name, why))
    return failed


def tripped(name: str) -> ModelFailed:
    failed = ModelFailed("timeout", f"model {name!r} timed out (gave up after 2 attempts)", attempts=2)
    failed.notices.append(ModelNotice("breaker_open", name, f"circuit breaker of model {name!r} opened"))
    return failed


class Member:
    """A scripted member: raises the given error, else answers."""

    def __init__(self, name: str, outcome: BaseException | None) -> None:
        self.name = name
        self.outcome = outcome
        self.calls = 0

    @property
    def chain_revision(self) -> int:
        return 1

    async def complete(
        self, request: LLMRequest, *, budget: TokenBudget | None = None, on_delta: DeltaSink | None = None
    ) -> LLMResult:
        self.calls += 1
        if self.outcome is not None:
            raise self.outcome
        return LLMResult(text=f"from {self.name}", model=self.name)


def chain_of(members: dict[str, Member]) -> FailoverLLM:
    names = list(members)
    models = {n: ModelConfig(id=n, name=n, base_url="http://x", model=n) for n in names}
    chain = ModelChain(revision=1, active=names[0], fallbacks=names[1:], models=models)
    return FailoverLLM(PinnedConfig(chain, Pricing()), lambda cfg: members[cfg.name])


async def test_notices_of_failed_members_come_back_on_the_result() -> None:
    members = {"a": Member("a", tripped("a")), "b": Member("b", skipped("b")), "c": Member("c", None)}
    llm = chain_of(members)
    result = await llm.complete(REQUEST)
    assert result.text == "from c"
    assert [(n.code, n.model) for n in result.notices] == [("breaker_open", "a"), ("model_skipped", "b")]
    # The same task hears of a skipped model once.
    members["a"].outcome = skipped("a")
    again = await llm.complete(REQUEST)
    assert [(n.code, n.model) for n in again.notices] == [("model_skipped", "a")]


async def test_when_every_member_fails_the_error_names_each_and_carries_the_notices() -> None:
    llm = chain_of({"a": Member("a", skipped("a")), "b": Member("b", tripped("b"))})
    with pytest.raises(LLMError) as caught:
        await llm.complete(REQUEST)
    assert caught.value.code == "timeout"
    assert str(caught.value) == (
        "all models failed: model 'b' timed out (gave up after 2 attempts); "
        "model 'a' skipped: its circuit breaker is open"
    )
    assert [n.code for n in caught.value.notices] == ["model_skipped", "breaker_open"]


async def test_only_skipped_members_mean_no_model_available() -> None:
    with pytest.raises(LLMError) as caught:
        await chain_of({"a": Member("a", skipped("a"))}).complete(REQUEST)
    assert caught.value.code == "unavailable"
    assert str(caught.value).startswith("no model available: model 'a' skipped")


async def test_a_final_error_stops_the_chain_and_keeps_earlier_notices() -> None:
    members = {"a": Member("a", tripped("a")), "b": Member("b", BudgetExceeded(11, 10)), "c": Member("c", None)}
    with pytest.raises(BudgetExceeded) as caught:
        await chain_of(members).complete(REQUEST)
    assert [(n.code, n.model) for n in caught.value.notices] == [("breaker_open", "a")]
    assert members["c"].calls == 0
