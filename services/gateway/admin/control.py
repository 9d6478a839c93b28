"""Publishing control-plane documents: DB first (the record), then KV put + broadcast
(shared.bus.control.ControlPlane). What is published is always re-read from the database, so
the last publish carries the latest state; `sync_all` repairs KV after a crash between the two."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlmodel import Session, col, select

from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.tables import ControlValue, ModelRow, Prompt, PromptVersionRow, now
from shared.bus.control import ControlPlane
from shared.contract.models import ModelChain, ModelConfig, ModelParams, PriceEntry, Pricing, PromptVersion

log = logging.getLogger("agentix.gateway.control")
CHAIN_KEY = "models.chain"
PRICING_KEY = "pricing"
_lock = asyncio.Lock()


def prompt_key(name: str) -> str:
    return f"prompts.{name}"


def model_config(row: ModelRow) -> ModelConfig:
    return ModelConfig(
        id=row.id,
        name=row.name,
        provider=row.provider,  # type: ignore[arg-type]
        base_url=row.base_url,
        model=row.model,
        api_key_enc=row.api_key_enc,
        params=ModelParams.model_validate(row.params or {}),
        enabled=row.enabled,
    )


def bump(session: Session, key: str, value: dict[str, Any], by: str | None) -> int:
    """Store a control document with revision+1 (row locked on PostgreSQL)."""
    row = session.exec(select(ControlValue).where(ControlValue.key == key).with_for_update()).first()
    if row is None:
        row = ControlValue(key=key, value=value, revision=0)
    row.value, row.revision, row.updated_by, row.updated_at = value, row.revision + 1, by, now()
    session.add(row)
    return row.revision


def current_chain(session: Session) -> ModelChain | None:
    row = session.get(ControlValue, CHAIN_KEY)
    if row is None:
        return None
    models = {m.name: model_config(m) for m in session.exec(select(ModelRow))}
    return ModelChain(
        revision=row.revision,
        active=row.value.get("active", ""),
        fallbacks=list(row.value.get("fallbacks", [])),
        models=models,
    )


def current_pricing(session: Session) -> Pricing | None:
    row = session.get(ControlValue, PRICING_KEY)
    if row is None:
        return None
    entries = {k: PriceEntry.model_validate(v) for k, v in (row.value.get("models") or {}).items()}
    return Pricing(revision=row.revision, models=entries)


def current_prompt(session: Session, name: str) -> PromptVersion | None:
    prompt = session.get(Prompt, name)
    if prompt is None or prompt.active_version is None:
        return None
    active = session.get(PromptVersionRow, (name, prompt.active_version))
    if active is None:
        return None
    canary = session.get(PromptVersionRow, (name, prompt.canary_version)) if prompt.canary_version else None
    return PromptVersion(
        name=name,
        version=active.version,
        text=active.text,
        revision=prompt.revision,
        canary_version=canary.version if canary else None,
        canary_text=canary.text if canary else None,
        canary_percent=prompt.canary_percent if canary else 0,
    )


class ControlPublisher:
    def __init__(self, db: Database, control: ControlPlane) -> None:
        self.db = db
        self.control = control

    async def _put(self, key: str, value: Any) -> None:
        try:
            await self.control.put(key, value)
        except Exception as exc:
            log.warning("control put of %s failed: %s", key, exc)
            raise ApiProblem(
                503, "Service Unavailable", "Saved, but not yet broadcast (bus unavailable); it is re-sent at start."
            ) from exc

    async def publish_chain(self) -> ModelChain | None:
        async with _lock:
            chain = await self.db.run(current_chain)
            if chain is not None:
                await self._put(CHAIN_KEY, chain)
            return chain

    async def publish_pricing(self) -> Pricing | None:
        async with _lock:
            pricing = await self.db.run(current_pricing)
            if pricing is not None:
                await self._put(PRICING_KEY, pricing)
            return pricing

    async def publish_prompt(self, name: str) -> PromptVersion | None:
        async with _lock:
            version = await self.db.run(current_prompt, name)
            if version is not None:
                await self._put(prompt_key(name), version)
            return version

    async def sync_all(self) -> None:
        """At start: put every document whose KV copy is missing or older than the database."""
        names = await self.db.run(lambda s: list(s.exec(select(Prompt.name).where(col(Prompt.active_version) != None))))  # noqa: E711
        jobs: list[tuple[str, Any]] = [
            (CHAIN_KEY, self.publish_chain),
            (PRICING_KEY, self.publish_pricing),
            *[(prompt_key(n), lambda n=n: self.publish_prompt(n)) for n in names],
        ]
        for key, publish in jobs:
            try:
                stored = await self.control.get(key)
                db_value = await self._db_value(key)
                if db_value is None:
                    continue
                if stored is None or int(stored[0].get("revision", -1)) < db_value.revision:
                    await publish()
            except Exception:
                log.exception("control sync of %s failed", key)

    async def _db_value(self, key: str) -> Any:
        if key == CHAIN_KEY:
            return await self.db.run(current_chain)
        if key == PRICING_KEY:
            return await self.db.run(current_pricing)
        return await self.db.run(current_prompt, key.split(".", 1)[1])
