"""The model pool: endpoints per model config, shared breakers, output cache, redaction, and
the control-plane view. It builds the objects a task calls and is never called back by them:
`pool.pinned()` gives a task a `failover.FailoverLLM` whose members are `model.ModelLLM`s, each
handed the pool's shared `ModelDeps` and its endpoint lookup.

    pool = ModelPool.for_service(settings, bus)          # KV breakers, Redis cache if configured
    await ControlPlane(bus).watch(pool.control.apply)     # hot swaps (apply is idempotent)
    llm = pool.pinned()                                   # at task start
    result = await llm.complete(LLMRequest(messages=[...]), budget=budget, on_delta=sink)
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from services.dispatcher.llm.breaker import (
    BreakerPolicy,
    BreakerStore,
    CircuitBreakers,
    KVBreakerStore,
    MemoryBreakerStore,
)
from services.dispatcher.llm.cache import LRUCache, OutputCache, RedisCache
from services.dispatcher.llm.chain_config import ModelControl
from services.dispatcher.llm.endpoint import Endpoint, OfflineEndpoint, OpenAIEndpoint
from services.dispatcher.llm.errors import AttemptError
from services.dispatcher.llm.failover import FailoverLLM
from services.dispatcher.llm.model import ModelDeps, ModelLLM, Sleep
from services.dispatcher.llm.retry import RetryPolicy
from services.dispatcher.redact import Redactor
from shared.contract.models import BreakerState, ModelChain, ModelConfig
from shared.secrets import SecretError, decrypt_secret
from shared.settings import DispatcherSettings

if TYPE_CHECKING:
    from shared.bus import Bus

log = logging.getLogger("agentix.llm.pool")


class ModelPool:
    def __init__(
        self,
        settings: DispatcherSettings,
        *,
        control: ModelControl | None = None,
        breaker_store: BreakerStore | None = None,
        breaker_policy: BreakerPolicy | None = None,
        cache: OutputCache | None = None,
        use_cache: bool = True,
        retry: RetryPolicy | None = None,
        redactor: Redactor | None = None,
        sleep: Sleep = asyncio.sleep,
        coalesce_deltas: bool = True,
    ) -> None:
        self.settings = settings
        self.control = control or ModelControl(settings)
        policy = breaker_policy or BreakerPolicy(
            failure_threshold=settings.breaker_failure_threshold, cooldown_s=settings.breaker_cooldown_s
        )
        self.deps = ModelDeps(
            breakers=CircuitBreakers(breaker_store or MemoryBreakerStore(), policy),
            retry=retry or RetryPolicy(attempts=settings.llm_retry_attempts),
            redactor=redactor or Redactor(extra=settings.redact_patterns),
            cache=(cache or LRUCache()) if use_cache else None,
            sleep=sleep,
            coalesce_deltas=coalesce_deltas,
            delta_interval_s=settings.token_event_interval_ms / 1000,
        )
        self._endpoints: dict[str, Endpoint] = {}
        self._secret: str | None = None

    @property
    def breakers(self) -> CircuitBreakers:
        return self.deps.breakers

    @property
    def retry(self) -> RetryPolicy:
        return self.deps.retry

    @property
    def redactor(self) -> Redactor:
        return self.deps.redactor

    @property
    def cache(self) -> OutputCache | None:
        return self.deps.cache

    @classmethod
    def for_service(cls, settings: DispatcherSettings, bus: Bus | None = None, **kwargs: object) -> ModelPool:
        """Breakers in the control KV bucket when a bus is given (shared by replicas), the
        output cache in Redis when `settings.redis_url` is set."""
        if bus is not None and "breaker_store" not in kwargs:
            kwargs["breaker_store"] = KVBreakerStore(bus)
        if settings.redis_url and "cache" not in kwargs:
            kwargs["cache"] = RedisCache(settings.redis_url, settings.redis_key_prefix)
        return cls(settings, **kwargs)  # type: ignore[arg-type]

    def pinned(
        self, model: str | None = None, chain_revision: int | None = None, chain: ModelChain | None = None
    ) -> FailoverLLM:
        """The LLM for a task starting now: bound to the current chain revision, pricing and
        prompts. `model` is the task's default alias (task option), else the chain's active.
        A resumed task passes the `chain_revision` it started with and the `chain` its
        checkpoint kept, and runs with that chain again."""
        config = self.control.snapshot(chain_revision, chain)

        def member(cfg: ModelConfig) -> ModelLLM:
            return ModelLLM(cfg, self.endpoint, self.deps, config.pricing, config.chain_revision)

        return FailoverLLM(config, member, model)

    def endpoint(self, cfg: ModelConfig) -> Endpoint:
        fingerprint = cfg.model_dump_json()
        found = self._endpoints.get(fingerprint)
        if found is not None:
            return found
        if cfg.provider == "offline":
            endpoint: Endpoint = OfflineEndpoint(cfg)
        else:
            endpoint = OpenAIEndpoint(cfg, self._api_key(cfg))
        self._endpoints[fingerprint] = endpoint
        return endpoint

    def _api_key(self, cfg: ModelConfig) -> str | None:
        if not cfg.api_key_enc:
            return None
        if self._secret is None:
            self._secret = self.settings.persistent_secret("secret_key")
        try:
            return decrypt_secret(cfg.api_key_enc, self._secret)
        except SecretError as exc:
            raise AttemptError("auth", f"the API key of model {cfg.name!r} cannot be used: {exc}") from exc

    async def breaker_states(self) -> list[BreakerState]:
        """Every chain model's breaker (for heartbeats and the admin status page)."""
        names = [c.name for c in self.control.chain.models.values()]
        return await self.breakers.states(names)

    async def watch_breakers(self) -> None:
        """Answer breaker checks from a watched copy of the shared states (`KVBreakerStore.watch`):
        no KV read per model call while nothing changes."""
        if isinstance(self.breakers.store, KVBreakerStore):
            await self.breakers.store.watch()

    async def aclose(self) -> None:
        if isinstance(self.breakers.store, KVBreakerStore):
            await self.breakers.store.stop()
        for endpoint in self._endpoints.values():
            try:
                await endpoint.aclose()
            except Exception:
                log.exception("closing model endpoint failed")
        self._endpoints.clear()
        if self.cache is not None:
            await self.cache.aclose()
