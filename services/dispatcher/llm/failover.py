"""A failover chain behind the same `LLM` interface as one model, pinned to one chain revision.

The chain is composed, not wired into the pool: it is given the pinned configuration (chain,
pricing, prompts) and `member`, which makes the `LLM` of one model of the chain (in the pool, a
`model.ModelLLM` with the shared breakers, retry policy, cache and redactor). It tries the models
in order — the requested alias first — and moves on when a member raises `ModelFailed`; any other
error (a broken stream, a crossed budget) ends the call. What the breakers did on the way comes
back as `notices` on the result, or on the error that ends the call; `model_skipped` is said once
per model per chain, i.e. once per task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from services.dispatcher.llm.api import (
    LLM,
    BudgetExceeded,
    DeltaSink,
    LLMError,
    LLMRequest,
    LLMResult,
    ModelNotice,
    TokenBudget,
)
from services.dispatcher.llm.chain_config import PinnedConfig, offline_config
from services.dispatcher.llm.model import ModelFailed
from shared.contract.models import OFFLINE_MODEL, ModelConfig

log = logging.getLogger("agentix.llm.failover")
MemberFactory = Callable[[ModelConfig], LLM]


class FailoverLLM:
    """An `LLM` for one task: the chain, pricing and prompts of the revision current at its start
    (`config`), each model reached through `member(cfg)`. `default_model` is the alias tried
    first when a request names none (the task's model option), else the chain's active one."""

    def __init__(self, config: PinnedConfig, member: MemberFactory, default_model: str | None = None) -> None:
        self.config = config
        self.default_model = default_model
        self._member = member
        self._skips_told: set[str] = set()

    @property
    def chain_revision(self) -> int:
        return self.config.chain_revision

    def candidates(self, alias: str | None) -> list[ModelConfig]:
        chain = self.config.chain
        ordered = chain.ordered()
        alias = alias or self.default_model
        if not alias:
            return ordered
        cfg = chain.models.get(alias)
        if cfg is None and alias == OFFLINE_MODEL:
            cfg = offline_config()
        if cfg is None:
            known = ", ".join(sorted(chain.models)) or "none"
            raise LLMError("model_not_found", f"unknown model {alias!r} (chain revision {chain.revision} has: {known})")
        if not cfg.enabled:
            raise LLMError("no_model", f"model {alias!r} is disabled")
        return [cfg, *[c for c in ordered if c.name != cfg.name]]

    async def complete(
        self, request: LLMRequest, *, budget: TokenBudget | None = None, on_delta: DeltaSink | None = None
    ) -> LLMResult:
        candidates = self.candidates(request.model)
        if not candidates:
            raise LLMError("no_model", f"no enabled model in chain revision {self.chain_revision}")
        failed: list[ModelFailed] = []
        notices: list[ModelNotice] = []
        try:
            for cfg in candidates:
                try:
                    result = await self._member(cfg).complete(request, budget=budget, on_delta=on_delta)
                except ModelFailed as exc:
                    failed.append(exc)
                    notices += self._news(exc.notices)
                    continue
                result.notices = [*notices, *self._news(result.notices)]
                return result
        except (LLMError, BudgetExceeded) as exc:  # final: it carries what happened before it
            exc.notices = [*notices, *self._news(exc.notices)]
            raise
        final = self._final_error(failed)
        final.notices = notices
        raise final

    def _news(self, notices: list[ModelNotice]) -> list[ModelNotice]:
        """The notices this task has not heard yet (a skipped model is said once)."""
        fresh: list[ModelNotice] = []
        for notice in notices:
            if notice.code == "model_skipped":
                if notice.model in self._skips_told:
                    continue
                self._skips_told.add(notice.model)
                log.info("%s", notice.message)
            fresh.append(notice)
        return fresh

    @staticmethod
    def _final_error(failed: list[ModelFailed]) -> LLMError:
        tried = [f for f in failed if not f.skipped]
        parts = [f.message for f in tried] + [f.message for f in failed if f.skipped]
        # A later call may succeed when any model's failure may pass (a skipped model's breaker closes).
        retryable = any(f.retryable for f in failed)
        if not tried:
            return LLMError("unavailable", "no model available: " + "; ".join(parts), retryable=retryable)
        prefix = "all models failed: " if len(parts) > 1 else ""
        return LLMError(tried[0].code, prefix + "; ".join(parts), retryable=retryable)
