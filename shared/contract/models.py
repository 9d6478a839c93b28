"""Model configs, the failover chain and pricing: what the control plane broadcasts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.contract.base import Contract

OFFLINE_MODEL = "offline"


class ModelParams(Contract):
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    timeout_s: float = 60.0
    extra: dict[str, Any] = Field(default_factory=dict)
    # The model takes images (content parts `image_url`): never sent to the provider, it tells
    # the gateway whether `/v1` requests with images may be answered by it.
    vision: bool = False


class ModelConfig(Contract):
    """One model endpoint. `name` is the alias used in DSL/chains (`model` config of agent nodes).
    `api_key_enc` is the API key encrypted with the deployment secret (AES-256-GCM, base64);
    plaintext keys never travel on the bus."""

    id: str
    name: str
    provider: Literal["openai", "offline"] = "openai"
    base_url: str | None = None
    model: str
    api_key_enc: str | None = None
    params: ModelParams = Field(default_factory=ModelParams)
    enabled: bool = True


class ModelChain(Contract):
    """The failover chain: `active` first, then `fallbacks` in order. `revision` grows with each
    change so replicas apply values idempotently and tasks can name the revision they ran with."""

    revision: int = 0
    active: str
    fallbacks: list[str] = Field(default_factory=list)
    models: dict[str, ModelConfig] = Field(default_factory=dict)

    def ordered(self) -> list[ModelConfig]:
        names = [self.active, *[f for f in self.fallbacks if f != self.active]]
        return [self.models[n] for n in names if n in self.models and self.models[n].enabled]


class PriceEntry(Contract):
    prompt_per_1k: float = 0.0
    completion_per_1k: float = 0.0


class Pricing(Contract):
    revision: int = 0
    models: dict[str, PriceEntry] = Field(default_factory=dict)


class PromptVersion(Contract):
    """The active version of a named prompt (control-plane key `prompts.<name>`). A canary sends
    `canary_percent` of new tasks to `canary_version`."""

    name: str
    version: int
    text: str
    revision: int = 0
    canary_version: int | None = None
    canary_text: str | None = None
    canary_percent: int = 0


class BreakerState(Contract):
    model: str
    state: Literal["closed", "open", "half_open"] = "closed"
    failures: int = 0
    opened_at: float | None = None
    last_error: str | None = None
    recent_failures: list[str] = Field(default_factory=list)


class Usage(Contract):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cached_calls: int = 0
    models: list[str] = Field(default_factory=list)

    def add(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=round(self.cost + other.cost, 8),
            cached_calls=self.cached_calls + other.cached_calls,
            models=sorted(set(self.models) | set(other.models)),
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ControlUpdate(Contract):
    """Broadcast on `P.control.<topic>` after the value was put to the control KV bucket.
    `revision` is the KV revision, so readers apply each key's values in order, once."""

    key: str
    revision: int
    value: Any = None
