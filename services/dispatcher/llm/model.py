"""One model behind the `LLM` interface: an endpoint with its circuit breaker, retries, output
cache, budget charging, redaction and pricing.

A call: output cache (non-streaming) → circuit breaker → attempts with backoff (`retry.py`) while
an attempt's failure is `retryable` (429, 5xx, timeouts), honouring Retry-After. When the model
gives up it raises `ModelFailed`, which a failover chain (`failover.py`) reads as "try the next
model". A failure after output reached the caller is final (`stream_broken`, a plain LLMError): a
stream never switches model midway. Every attempt charges the task's TokenBudget as tokens
arrive, and all text passes the streaming redactor before it reaches `on_delta` or the result.
What the breaker did (`breaker_open`, `model_skipped`) travels on the raised error as `notices`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from services.dispatcher.llm.api import (
    BudgetExceeded,
    Delta,
    DeltaSink,
    LLMError,
    LLMRequest,
    LLMResult,
    ModelNotice,
    TokenBudget,
)
from services.dispatcher.llm.breaker import CircuitBreakers
from services.dispatcher.llm.cache import OutputCache, cache_key
from services.dispatcher.llm.deltas import DeltaStream
from services.dispatcher.llm.endpoint import Endpoint, Generation
from services.dispatcher.llm.errors import AttemptError
from services.dispatcher.llm.retry import RetryPolicy
from services.dispatcher.llm.tokens import estimate_messages, estimate_text
from services.dispatcher.redact import Redactor
from shared.contract.models import ModelConfig, Pricing, Usage

Sleep = Callable[[float], Awaitable[None]]
Connect = Callable[[ModelConfig], Endpoint]  # may raise AttemptError (e.g. an unusable API key)


class ModelFailed(LLMError):
    """This model gave up on the call before any output reached the caller, so another model may
    take it. `attempts` is 0 when the model was skipped (its breaker is open)."""

    def __init__(self, code: str, message: str, *, attempts: int, retryable: bool = False) -> None:
        super().__init__(code, message, retryable=retryable)
        self.attempts = attempts

    @property
    def skipped(self) -> bool:
        return self.attempts == 0


@dataclass(frozen=True)
class ModelDeps:
    """What every model of one pool shares; the pool builds it once and hands it to each model."""

    breakers: CircuitBreakers
    retry: RetryPolicy
    redactor: Redactor
    cache: OutputCache | None = None
    sleep: Sleep = asyncio.sleep
    # Merge deltas that arrive while the sink is still publishing the previous one, or within
    # `delta_interval_s` after it (llm/deltas.py): fewer, larger token events when the model
    # streams faster than that.
    coalesce_deltas: bool = True
    delta_interval_s: float = 0.0


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

    def allowed(self) -> int | None:
        """The most this attempt may have charged in all without crossing the budget (None: no
        budget)."""
        if self.budget is None:
            return None
        return self.budget.limit - (self.budget.used - self.charged)

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


class ModelLLM:
    """One model as an `LLM`. `connect` gives the endpoint for its config (the pool keeps one
    client per config); `pricing` prices its usage; `chain_revision` is the revision it was
    pinned from."""

    def __init__(
        self,
        config: ModelConfig,
        connect: Connect,
        deps: ModelDeps,
        pricing: Pricing | None = None,
        chain_revision: int = 0,
    ) -> None:
        self.config = config
        self._connect = connect
        self._deps = deps
        self._pricing = pricing or Pricing()
        self._chain_revision = chain_revision

    @property
    def chain_revision(self) -> int:
        return self._chain_revision

    async def complete(
        self, request: LLMRequest, *, budget: TokenBudget | None = None, on_delta: DeltaSink | None = None
    ) -> LLMResult:
        try:
            endpoint = self._connect(self.config)
        except AttemptError as err:
            raise ModelFailed(err.code, err.message, attempts=1, retryable=err.retryable) from err
        cache = self._deps.cache
        key = None
        if not request.stream and cache is not None:
            key = cache_key(self.config, request, endpoint.params(request))
            hit = await cache.get(key)
            if hit is not None:
                return await self._from_cache(hit, on_delta)
        result = await self._with_retries(endpoint, request, budget, on_delta)
        if key is not None and cache is not None:
            await cache.put(key, result)
        return result

    async def _with_retries(
        self, endpoint: Endpoint, request: LLMRequest, budget: TokenBudget | None, on_delta: DeltaSink | None
    ) -> LLMResult:
        name = self.config.name
        breakers, policy = self._deps.breakers, self._deps.retry
        notices: list[ModelNotice] = []
        last: AttemptError | None = None
        retries = policy.backoff.start()
        tries = 0
        while True:
            admission = await breakers.admit(name)
            if admission is None:
                if last is None:
                    why = f"model {name!r} skipped: its circuit breaker is open"
                    # The breaker closes again after its cooldown: a later call may reach it.
                    skipped = ModelFailed("unavailable", why, attempts=0, retryable=True)
                    skipped.notices.append(ModelNotice("model_skipped", name, why))
                    raise skipped
                break
            charge = _Charge(budget)
            emitted: list[bool] = [False]
            try:
                result = await self._attempt(endpoint, request, charge, on_delta, emitted)
            except AttemptError as err:
                last, tries = err, tries + 1
                if not emitted[0]:
                    charge.refund()
                state = None
                if err.counts_for_breaker:
                    state, changed = await breakers.failure(name, err.code, err.message)
                    if changed and state.state == "open":
                        notices.append(self._opened(state.failures, err, breakers.policy.cooldown_s))
                else:  # the endpoint answered: it is up, whatever it thought of this request
                    await breakers.success(name)
                if emitted[0]:
                    broken = LLMError(
                        "stream_broken",
                        f"{err.message} — the stream broke after output had started, so it was not "
                        "retried or moved to another model",
                        retryable=err.retryable,
                    )
                    broken.notices = notices
                    raise broken from err
                if not err.retryable or (state and state.state == "open"):
                    break
                wait = retries.next_wait()  # None: this model's attempts are spent
                if wait is None:
                    break
                delay = err.retry_after if err.retry_after is not None else wait
                if delay > policy.max_retry_after_s:
                    break
                await self._deps.sleep(delay)
                continue
            except BaseException:
                if admission == "probe":  # budget stop or cancellation: let the next caller probe
                    await breakers.release_probe(name)
                raise
            await breakers.success(name)
            return result
        assert last is not None  # the loop ends after a failed attempt (the first admission raises)
        gave_up = ModelFailed(
            last.code, last.message + (f" (gave up after {tries} attempts)" if tries > 1 else ""), attempts=tries,
            retryable=last.retryable,
        )
        gave_up.notices = notices
        raise gave_up from last

    def _opened(self, failures: int, err: AttemptError, cooldown_s: float) -> ModelNotice:
        name = self.config.name
        return ModelNotice(
            "breaker_open",
            name,
            f"circuit breaker of model {name!r} opened after {failures} failures "
            f"(last: {err.message}); calls skip it until a probe succeeds ({cooldown_s:g}s cooldown)",
        )

    async def _attempt(
        self,
        endpoint: Endpoint,
        request: LLMRequest,
        charge: _Charge,
        on_delta: DeltaSink | None,
        emitted: list[bool],
    ) -> LLMResult:
        cfg = self.config
        prompt_estimate = estimate_messages(request.messages, request.tools)
        charge.up_to(prompt_estimate)
        redactor = self._deps.redactor
        redactors = {"token": redactor.stream(), "thinking": redactor.stream()}
        out: dict[str, list[str]] = {"token": [], "thinking": []}
        raw_chars = [0]
        deltas = (DeltaStream(on_delta, self._deps.coalesce_deltas, self._deps.delta_interval_s)
                  if on_delta is not None else None)

        calls: dict[str, tuple[str, str]] = {}  # redactor key of a call's arguments → (call id, function)

        async def forward(kind: str, text: str) -> None:
            if not text:
                return
            call = calls.get(kind)
            if call is None:
                out[kind].append(text)
            if deltas is not None:
                emitted[0] = True
                if call is None:
                    await deltas.push(Delta(kind, text, cfg.name))  # type: ignore[arg-type]
                else:
                    await deltas.push(Delta("tool_input", text, cfg.name, call_id=call[0], tool=call[1]))

        async def sink(kind: Literal["token", "thinking", "tool_input"], raw: str,
                       call: tuple[str, str] | None) -> None:
            key: str = kind
            if call is not None:  # each call's arguments are a stream of their own (a secret may span chunks)
                key = f"tool_input:{call[0]}"
                if key not in redactors:
                    calls[key] = call
                    redactors[key] = redactor.stream()
            # Charged as it arrives, so a running stream stops as soon as the budget is crossed.
            # A piece is what one read brought (endpoint.py): as if it had come in small pieces,
            # the part that fits in the budget still streams, and the stop is charged one token
            # past the budget, not the whole piece.
            seen, raw_chars[0] = raw_chars[0], raw_chars[0] + len(raw)
            allowed = charge.allowed()
            if allowed is not None and prompt_estimate + math.ceil(raw_chars[0] / 4) > allowed:
                fits = max(0, 4 * (allowed - prompt_estimate) - seen)
                if fits > 0:
                    await forward(key, redactors[key].feed(raw[:fits]))
                raw_chars[0] = min(raw_chars[0], seen + fits + 4)
            charge.up_to(prompt_estimate + math.ceil(raw_chars[0] / 4))
            await forward(key, redactors[key].feed(raw))

        try:
            # The stream is read when what it reads can go out (`DeltaStream.read_wait`).
            gen: Generation = await endpoint.generate(request, sink if request.stream else None, pace=deltas)
            if not request.stream:
                await forward("thinking", redactors["thinking"].feed(gen.thinking))
                await forward("token", redactors["token"].feed(gen.text))
            for kind in ("thinking", "token", *calls):
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
            cost=cost_of(self._pricing, cfg, prompt, completion),
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

    async def _from_cache(self, hit: LLMResult, on_delta: DeltaSink | None) -> LLMResult:
        name = self.config.name
        if on_delta is not None and hit.text:
            await on_delta(Delta("token", hit.text, name))
        hit.usage = Usage(cached_calls=1, models=[name])
        hit.cached = True
        hit.model = name
        return hit
