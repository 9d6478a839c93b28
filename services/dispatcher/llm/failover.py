"""The failover chain behind the `LLM` interface, pinned to one chain revision.

For each model of the chain in order: output cache (non-streaming) → circuit breaker →
attempts with backoff on 429/5xx/timeouts (honouring Retry-After) → next model. A failure after
output reached the caller is final (`stream_broken`): a stream never switches model midway.
Every attempt charges the task's TokenBudget as tokens arrive, and all text passes the
streaming redactor before it reaches `on_delta` or the result.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.dispatcher.llm.api import (
    BudgetExceeded,
    Delta,
    DeltaSink,
    LLMError,
    LLMRequest,
    LLMResult,
    TokenBudget,
)
from services.dispatcher.llm.cache import cache_key
from services.dispatcher.llm.control import PinnedConfig, offline_config
from services.dispatcher.llm.deltas import DeltaStream
from services.dispatcher.llm.endpoint import Endpoint, Generation
from services.dispatcher.llm.errors import AttemptError
from services.dispatcher.llm.tokens import estimate_messages, estimate_text
from shared.contract.models import OFFLINE_MODEL, ModelConfig, Pricing, Usage

if TYPE_CHECKING:
    from services.dispatcher.llm.pool import ModelPool

log = logging.getLogger("agentix.llm.failover")
BreakerNotice = Callable[[str, str, str], Awaitable[None]]  # (code, model, message)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # per model, the first included
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 30.0  # a longer Retry-After: fail over now rather than wait

    def backoff(self, attempt: int) -> float:
        delay = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return delay / 2 + random.uniform(0, delay / 2)  # jitter spreads replicas apart


def cost_of(pricing: Pricing, cfg: ModelConfig, prompt: int, completion: int) -> float:
    entry = pricing.models.get(cfg.name) or pricing.models.get(cfg.model)
    if entry is None:
        return 0.0
    return round(prompt / 1000 * entry.prompt_per_1k + completion / 1000 * entry.completion_per_1k, 8)


class _Charge:
    """What one attempt has charged to the budget, so it can be trued up or refunded."""

    def __init__(self, budget: TokenBudget | None) -> None:
        self.budget = budget
        self.charged = 0

    def up_to(self, total: int) -> None:
        if self.budget is not None and total > self.charged:
            step, self.charged = total - self.charged, total
            self.budget.charge(step)

    def settle(self, actual: int) -> None:
        if self.budget is None:
            return
        if actual > self.charged:
            self.up_to(actual)
        else:
            self.budget.used -= self.charged - actual
            self.charged = actual

    def refund(self) -> None:
        if self.budget is not None and self.budget.used <= self.budget.limit:
            self.budget.used -= self.charged
            self.charged = 0


class PinnedLLM:
    """An `LLM` for one task: the chain, pricing and prompts of the revision current at its start.

    `on_breaker(code, model, message)`, when set, hears what the breakers did to this task's
    calls: `breaker_open` (one of its calls tripped a model's breaker) and `model_skipped` (a
    model was skipped because its breaker is open; said once per model)."""

    def __init__(self, pool: ModelPool, config: PinnedConfig, model: str | None = None) -> None:
        self.pool = pool
        self.config = config
        self.default_model = model
        self.on_breaker: BreakerNotice | None = None
        self._skips_told: set[str] = set()

    async def _tell(self, code: str, model: str, message: str) -> None:
        if self.on_breaker is None:
            return
        if code == "model_skipped":
            if model in self._skips_told:
                return
            self._skips_told.add(model)
        try:
            await self.on_breaker(code, model, message)
        except Exception:  # informational: never let it fail the model call
            log.exception("breaker notice for %s failed", model)

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
        failed: list[tuple[AttemptError, int]] = []
        skipped: list[str] = []
        for cfg in candidates:
            try:
                endpoint = self.pool.endpoint(cfg)
            except AttemptError as err:
                failed.append((err, 1))
                continue
            key = None
            if not request.stream and self.pool.cache is not None:
                key = cache_key(cfg, request, endpoint.params(request))
                hit = await self.pool.cache.get(key)
                if hit is not None:
                    return await self._from_cache(hit, cfg, on_delta)
            result = await self._try_model(cfg, endpoint, request, budget, on_delta, failed, skipped)
            if result is not None:
                if key is not None:
                    await self.pool.cache.put(key, result)  # type: ignore[union-attr]
                return result
        raise self._final_error(failed, skipped)

    async def _try_model(
        self,
        cfg: ModelConfig,
        endpoint: Endpoint,
        request: LLMRequest,
        budget: TokenBudget | None,
        on_delta: DeltaSink | None,
        failed: list[tuple[AttemptError, int]],
        skipped: list[str],
    ) -> LLMResult | None:
        breakers = self.pool.breakers
        policy = self.pool.retry
        last: AttemptError | None = None
        tries = 0
        for attempt in range(policy.attempts):
            admission = await breakers.admit(cfg.name)
            if admission is None:
                if last is None:
                    skipped.append(cfg.name)
                    why = f"model {cfg.name!r} skipped: its circuit breaker is open"
                    await self._tell("model_skipped", cfg.name, why)
                break
            charge = _Charge(budget)
            emitted: list[bool] = [False]
            try:
                result = await self._attempt(cfg, endpoint, request, charge, on_delta, emitted)
            except AttemptError as err:
                last, tries = err, attempt + 1
                if not emitted[0]:
                    charge.refund()
                state = None
                if err.counts_for_breaker:
                    state, changed = await breakers.failure(cfg.name, err.code, err.message)
                    if changed and state.state == "open":
                        await self._tell(
                            "breaker_open",
                            cfg.name,
                            f"circuit breaker of model {cfg.name!r} opened after {state.failures} failures "
                            f"(last: {err.message}); calls skip it until a probe succeeds "
                            f"({breakers.policy.cooldown_s:g}s cooldown)",
                        )
                else:  # the endpoint answered: it is up, whatever it thought of this request
                    await breakers.success(cfg.name)
                if emitted[0]:
                    raise LLMError(
                        "stream_broken",
                        f"{err.message} — the stream broke after output had started, so it was not "
                        "retried or moved to another model",
                    ) from err
                if not err.retryable or attempt + 1 >= policy.attempts or (state and state.state == "open"):
                    break
                delay = err.retry_after if err.retry_after is not None else policy.backoff(attempt)
                if delay > policy.max_retry_after_s:
                    break
                await self.pool.sleep(delay)
                continue
            except BaseException:
                if admission == "probe":  # budget stop or cancellation: let the next caller probe
                    await breakers.release_probe(cfg.name)
                raise
            await breakers.success(cfg.name)
            return result
        if last is not None:
            failed.append((last, tries))
        return None

    async def _attempt(
        self,
        cfg: ModelConfig,
        endpoint: Endpoint,
        request: LLMRequest,
        charge: _Charge,
        on_delta: DeltaSink | None,
        emitted: list[bool],
    ) -> LLMResult:
        prompt_estimate = estimate_messages(request.messages, request.tools)
        charge.up_to(prompt_estimate)
        redactors = {"token": self.pool.redactor.stream(), "thinking": self.pool.redactor.stream()}
        out: dict[str, list[str]] = {"token": [], "thinking": []}
        raw_chars = [0]
        deltas = DeltaStream(on_delta, self.pool.coalesce_deltas) if on_delta is not None else None

        async def forward(kind: str, text: str) -> None:
            if not text:
                return
            out[kind].append(text)
            if deltas is not None:
                emitted[0] = True
                await deltas.push(Delta(kind, text, cfg.name))  # type: ignore[arg-type]

        async def sink(kind: str, raw: str) -> None:
            raw_chars[0] += len(raw)
            # Charged as it arrives, so a running stream stops as soon as the budget is crossed.
            charge.up_to(prompt_estimate + math.ceil(raw_chars[0] / 4))
            await forward(kind, redactors[kind].feed(raw))

        try:
            gen: Generation = await endpoint.generate(request, sink if request.stream else None)
            if not request.stream:
                await forward("thinking", redactors["thinking"].feed(gen.thinking))
                await forward("token", redactors["token"].feed(gen.text))
            for kind in ("thinking", "token"):
                await forward(kind, redactors[kind].flush())
            if deltas is not None:
                await deltas.flush()
        except (AttemptError, BudgetExceeded):
            if deltas is not None:  # what passed before the failure still reaches the caller
                await deltas.settle()
            raise
        except BaseException:
            if deltas is not None:
                deltas.cancel()
            raise
        if gen.usage is not None:
            prompt, completion = gen.usage
        else:
            prompt = prompt_estimate
            completion = (
                estimate_text(gen.text)
                + estimate_text(gen.thinking)
                + sum(estimate_text(str(c.arguments)) for c in gen.tool_calls)
            )
        charge.settle(prompt + completion)
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost_of(self.config.pricing, cfg, prompt, completion),
            models=[cfg.name],
        )
        return LLMResult(
            text="".join(out["token"]),
            model=cfg.name,
            usage=usage,
            tool_calls=gen.tool_calls,
            thinking="".join(out["thinking"]),
            finish_reason=gen.finish_reason,
        )

    async def _from_cache(self, hit: LLMResult, cfg: ModelConfig, on_delta: DeltaSink | None) -> LLMResult:
        if on_delta is not None and hit.text:
            await on_delta(Delta("token", hit.text, cfg.name))
        hit.usage = Usage(cached_calls=1, models=[cfg.name])
        hit.cached = True
        hit.model = cfg.name
        return hit

    def _final_error(self, failed: list[tuple[AttemptError, int]], skipped: list[str]) -> LLMError:
        parts = [err.message + (f" (gave up after {n} attempts)" if n > 1 else "") for err, n in failed]
        parts += [f"model {name!r} skipped: its circuit breaker is open" for name in skipped]
        if not failed:
            return LLMError("unavailable", "no model available: " + "; ".join(parts))
        prefix = "all models failed: " if len(parts) > 1 else ""
        return LLMError(failed[0][0].code, prefix + "; ".join(parts))
