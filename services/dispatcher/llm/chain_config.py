"""The model chain, pricing and prompts as the control plane last set them (hot-swappable).

The dispatcher feeds `ModelControl.apply` from the control KV watcher
(`ControlPlane(bus).watch(control.apply)`); values are applied idempotently by revision.
A task pins a `PinnedConfig` snapshot when it starts, so a hot swap applies to later tasks only.

Keys (`shared.contract.control_keys`): the chain (ModelChain), pricing (Pricing), `prompts.<name>`
(PromptVersion). Other keys in the bucket (e.g. `breakers.*`) are not ours and are ignored.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shared.contract.control_keys import CHAIN_KEY, PRICING_KEYS, PROMPT_PREFIX
from shared.contract.models import (
    OFFLINE_MODEL,
    ModelChain,
    ModelConfig,
    Pricing,
    PromptVersion,
)
from shared.secrets import encrypt_secret
from shared.settings import DispatcherSettings

log = logging.getLogger("agentix.llm.chain_config")
DEFAULT_MODEL = "gpt-4o-mini"
HISTORY = 16  # chain revisions remembered for resumed tasks


def offline_config() -> ModelConfig:
    return ModelConfig(id=OFFLINE_MODEL, name=OFFLINE_MODEL, provider="offline", model=OFFLINE_MODEL)


def seed_chain(settings: DispatcherSettings) -> ModelChain:
    """The chain before anything is in KV: the `AGENTIX_LLM_*` endpoint, else the offline model.
    (No silent offline fallback behind a real endpoint: a real failure must show.)"""
    if not settings.llm_base_url:
        return ModelChain(revision=0, active=OFFLINE_MODEL, models={OFFLINE_MODEL: offline_config()})
    name = settings.llm_model or DEFAULT_MODEL
    key_enc = (
        encrypt_secret(settings.llm_api_key, settings.persistent_secret("secret_key")) if settings.llm_api_key else None
    )
    cfg = ModelConfig(id="default", name=name, base_url=settings.llm_base_url, model=name, api_key_enc=key_enc)
    return ModelChain(revision=0, active=name, models={name: cfg})


@dataclass(frozen=True)
class PinnedConfig:
    """What one task runs with, fixed at its start."""

    chain: ModelChain
    pricing: Pricing
    prompts: dict[str, PromptVersion] = field(default_factory=dict)

    @property
    def chain_revision(self) -> int:
        return self.chain.revision

    def prompt(self, name: str, task_id: str) -> tuple[int, str] | None:
        """The (version, text) of prompt `name` for this task; a canary gets its share of tasks,
        chosen by a stable hash of the task id (a retried task keeps its version)."""
        pv = self.prompts.get(name)
        if pv is None:
            return None
        if pv.canary_version is not None and pv.canary_text is not None and pv.canary_percent > 0:
            bucket = int.from_bytes(hashlib.sha256(f"{name}:{task_id}".encode()).digest()[:4], "big") % 100
            if bucket < pv.canary_percent:
                return pv.canary_version, pv.canary_text
        return pv.version, pv.text

    def prompt_versions(self, task_id: str) -> dict[str, int]:
        """For the `status: running` event: the version of every prompt this task would use."""
        out: dict[str, int] = {}
        for name in self.prompts:
            chosen = self.prompt(name, task_id)
            if chosen:
                out[name] = chosen[0]
        return out


class ModelControl:
    """Holds the current chain + pricing + prompts and applies updates by revision."""

    def __init__(self, settings: DispatcherSettings, chain: ModelChain | None = None,
                 pricing: Pricing | None = None) -> None:
        self._settings = settings
        self._chain = chain if chain is not None else seed_chain(settings)
        self._seeded = chain is None
        self._pricing = pricing or Pricing()
        self._prompts: dict[str, PromptVersion] = {}
        # Recent chains by revision, so a task resumed elsewhere can run with the revision it
        # started with (its checkpoint names it) while that revision is still remembered.
        self._history: OrderedDict[int, ModelChain] = OrderedDict({self._chain.revision: self._chain})

    @property
    def chain(self) -> ModelChain:
        return self._chain

    @property
    def pricing(self) -> Pricing:
        return self._pricing

    @property
    def seeded(self) -> bool:
        """True while the chain still comes from settings (nothing in KV yet)."""
        return self._seeded

    def snapshot(self, chain_revision: int | None = None, pinned: ModelChain | None = None) -> PinnedConfig:
        """The current values; with `chain_revision`, that chain: remembered here, else `pinned`
        (the chain a task kept in its checkpoint, so a dispatcher that never saw that revision —
        started after a hot swap — still resumes the task with it)."""
        chain = self._chain
        if chain_revision is not None and chain_revision != chain.revision:
            old = self._history.get(chain_revision)
            if old is None and pinned is not None and pinned.revision == chain_revision:
                old = pinned
            if old is None:
                log.warning("chain revision %s is no longer known; using %s", chain_revision, chain.revision)
            else:
                chain = old
        # Contract models are replaced, never mutated, so sharing them is safe.
        return PinnedConfig(chain, self._pricing, dict(self._prompts))

    def apply(self, key: str, value: Any, revision: int = 0) -> bool:
        """Apply one control value (a dict or a contract model); True when it changed anything.
        `revision` is the KV revision, used when the value carries no revision of its own."""
        try:
            if key == CHAIN_KEY:
                return self._apply_chain(ModelChain.model_validate(_plain(value)), revision)
            if key in PRICING_KEYS:
                return self._apply_pricing(Pricing.model_validate(_plain(value)), revision)
            if key.startswith(PROMPT_PREFIX):
                return self._apply_prompt(PromptVersion.model_validate(_plain(value)), revision)
        except ValidationError as exc:
            log.error("ignoring invalid control value for %s: %s", key, exc)
        return False

    def delete(self, key: str) -> bool:
        if key.startswith(PROMPT_PREFIX):
            return self._prompts.pop(key[len(PROMPT_PREFIX) :], None) is not None
        return False

    def _apply_chain(self, chain: ModelChain, revision: int) -> bool:
        if not chain.revision:
            chain = chain.model_copy(update={"revision": revision})
        if not self._seeded and chain.revision <= self._chain.revision:
            return False
        if not chain.active:  # the admin cleared the chain: back to the built-in model
            seed = seed_chain(self._settings)
            chain = chain.model_copy(update={"active": seed.active, "fallbacks": [],
                                             "models": {**chain.models, **seed.models}})
        missing = [n for n in [chain.active, *chain.fallbacks] if n not in chain.models and n != OFFLINE_MODEL]
        if missing:
            log.warning("chain revision %s names unknown models %s; they are skipped", chain.revision, missing)
        if OFFLINE_MODEL in [chain.active, *chain.fallbacks] and OFFLINE_MODEL not in chain.models:
            chain = chain.model_copy(update={"models": {**chain.models, OFFLINE_MODEL: offline_config()}})
        self._chain = chain
        self._seeded = False
        self._history[chain.revision] = chain
        while len(self._history) > HISTORY:
            self._history.popitem(last=False)
        return True

    def _apply_pricing(self, pricing: Pricing, revision: int) -> bool:
        if not pricing.revision:
            pricing = pricing.model_copy(update={"revision": revision})
        if pricing.revision <= self._pricing.revision:
            return False
        self._pricing = pricing
        return True

    def _apply_prompt(self, prompt: PromptVersion, revision: int) -> bool:
        if not prompt.revision:
            prompt = prompt.model_copy(update={"revision": revision})
        current = self._prompts.get(prompt.name)
        if current is not None and prompt.revision <= current.revision:
            return False
        self._prompts[prompt.name] = prompt
        return True


def _plain(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value
