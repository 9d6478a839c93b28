"""Publishing control-plane documents: DB first (the record), then KV put + broadcast
(shared.bus.control.ControlPlane). What is published is always re-read from the database and
written with a compare-and-set on the key's KV revision, retried after re-reading both: however
many gateway replicas publish at once, KV never goes back to an older document revision.
`sync_all` repairs KV after a crash between the two writes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from nats.js.errors import KeyWrongLastSequenceError
from sqlmodel import Session, col, select

from services.gateway.db import Database, get_or_create_locked
from services.gateway.problems import ApiProblem
from services.gateway.tables import ControlValue, McpServerRow, ModelRow, Prompt, PromptVersionRow, now
from shared.bus.control import ControlPlane
from shared.contract.control_keys import CHAIN_KEY, MCP_SERVERS_KEY, PRICING_KEY, prompt_key
from shared.contract.mcp import McpServerConfig, McpServers
from shared.contract.models import ModelChain, ModelConfig, ModelParams, PriceEntry, Pricing, PromptVersion

log = logging.getLogger("agentix.gateway.control")
CAS_ATTEMPTS = 20
Doc = TypeVar("Doc", ModelChain, Pricing, PromptVersion, McpServers)


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
    row = get_or_create_locked(session, ControlValue, key=key)
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
        active=row.value.get("active") or "",  # "" = cleared: dispatchers use their built-in model
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


def current_mcp_servers(session: Session) -> McpServers | None:
    """Every registered MCP server (disabled ones too, so the bridge can say why their tools are
    gone), headers still encrypted, with the revision of the last change."""
    row = session.get(ControlValue, MCP_SERVERS_KEY)
    if row is None:
        return None
    servers = {
        r.name: McpServerConfig(
            name=r.name,
            transport=r.transport,  # type: ignore[arg-type]  # written by McpServerIn: http | sse | stdio
            url=r.url,
            headers_enc=r.headers_enc,
            command=r.command,
            args=list(r.args or []),
            network=r.network,
            read_paths=list(r.read_paths or []),
            memory_mb=r.memory_mb,
            sampling=r.sampling,
            enabled=r.enabled,
            allow=list(r.allow_tools or []),
            deny=list(r.deny_tools or []),
            high_risk=list(r.high_risk_tools or []),
        )
        for r in session.exec(select(McpServerRow))
    }
    return McpServers(revision=row.revision, servers=servers)


class ControlPublisher:
    def __init__(self, db: Database, control: ControlPlane) -> None:
        self.db = db
        self.control = control
        self._lock = asyncio.Lock()  # fewer CAS conflicts between requests of one replica
        self._background: set[asyncio.Task[None]] = set()

    async def _publish(self, key: str, load: Callable[[Session], Doc | None]) -> Doc | None:
        """Put the database's current document unless KV already holds it or a newer one.
        Each attempt re-reads the DB state and the key's KV revision; the put succeeds only
        if no other replica wrote the key in between, else the next attempt decides again."""
        async with self._lock:
            for _ in range(CAS_ATTEMPTS):
                doc = await self.db.run(load)
                if doc is None:
                    return None
                if not self.control.bus.connected:  # answer now rather than after a KV timeout
                    raise _not_broadcast()
                try:
                    stored = await self.control.get(key)
                    if stored is not None and _doc_revision(stored[0]) >= doc.revision:
                        return doc  # this state (or a newer one) is published already
                    await self.control.put_if(key, doc, stored[1] if stored else 0)
                    return doc
                except KeyWrongLastSequenceError:
                    continue  # another replica published in between: look again
                except Exception as exc:
                    log.warning("control put of %s failed: %s", key, exc)
                    raise _not_broadcast() from exc
        log.warning("control put of %s lost %d compare-and-set races in a row", key, CAS_ATTEMPTS)
        raise _not_broadcast()

    async def publish_chain(self) -> ModelChain | None:
        return await self._publish(CHAIN_KEY, current_chain)

    async def publish_pricing(self) -> Pricing | None:
        return await self._publish(PRICING_KEY, current_pricing)

    async def publish_prompt(self, name: str) -> PromptVersion | None:
        return await self._publish(prompt_key(name), lambda s: current_prompt(s, name))

    async def publish_mcp_servers(self) -> McpServers | None:
        return await self._publish(MCP_SERVERS_KEY, current_mcp_servers)

    async def sync_soon(self) -> None:
        """Bus reconnect callback: sync in the background so the reconnect is not held up."""
        task = asyncio.create_task(self.sync_all(), name="control-sync")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def sync_all(self) -> None:
        """At start: put every document whose KV copy is missing or older than the database."""
        names = await self.db.run(lambda s: list(s.exec(select(Prompt.name).where(col(Prompt.active_version) != None))))  # noqa: E711
        jobs: list[tuple[str, Callable[[], Any]]] = [
            (CHAIN_KEY, self.publish_chain),
            (PRICING_KEY, self.publish_pricing),
            (MCP_SERVERS_KEY, self.publish_mcp_servers),
            *[(prompt_key(n), lambda n=n: self.publish_prompt(n)) for n in names],
        ]
        for key, publish in jobs:
            try:
                await publish()  # a no-op when KV is up to date
            except Exception:
                log.exception("control sync of %s failed", key)


def _doc_revision(value: Any) -> int:
    try:
        return int(value.get("revision", -1)) if isinstance(value, dict) else -1
    except (TypeError, ValueError):
        return -1


def _not_broadcast() -> ApiProblem:
    return ApiProblem(
        503, "Service Unavailable", "Saved, but not yet broadcast (bus unavailable); it is sent when the bus is back."
    )
