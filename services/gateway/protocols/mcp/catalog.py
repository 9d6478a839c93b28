"""What an MCP caller sees of Agentix's tools: the agent-visible tools of every tool service
(`list_tools` over NATS, so a new tool shows up without a gateway change), less the high-risk
ones this caller may not run without an approval step, each without its injected parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from services.gateway.access.principal import Principal
from shared.bus.tools import CachedListing, ToolClient, ToolListing
from shared.contract.tools import ToolDescriptor
from shared.settings import GatewaySettings

EVERYONE = "*"
ADMINS = "admins"


def may_run_high_risk(settings: GatewaySettings, principal: Principal) -> bool:
    """`AGENTIX_MCP_HIGH_RISK_FOR`: MCP has no approval step, so only these callers get high-risk tools."""
    allowed = settings.mcp_high_risk_for
    return EVERYONE in allowed or principal.id in allowed or (ADMINS in allowed and principal.is_admin)


def mcp_tool(tool: ToolDescriptor) -> types.Tool:
    hints = tool.annotations
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description or tool.title,
        input_schema=tool.public_schema(),
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
    )


class Registry:
    """One `list_tools` round: the descriptors by name, and their MCP form, built once per round
    rather than per `tools/list` (the public schema is a deep copy of each tool's schema)."""

    def __init__(self, listing: ToolListing | None) -> None:
        self.listing = listing
        agent = sorted((t for t in listing.tools if t.agent), key=lambda t: t.name) if listing else []
        self.tools = {t.name: t for t in agent}
        self.listed = {t.name: mcp_tool(t) for t in agent}


class ToolCatalog:
    """The agent-visible tools by name, as the tool services listed them (`CachedListing`: a new
    tool within seconds, a restarted service's tools within a second), and at once when a caller
    names a tool not seen yet."""

    def __init__(self, client: ToolClient) -> None:
        self.tools = CachedListing(client)
        self._registry = Registry(None)

    @property
    def client(self) -> ToolClient:
        return self.tools.client

    async def current(self, *, refresh: bool = False) -> Registry:
        """The registry of the listing as it stands (asked for again when `refresh` or expired)."""
        listing = await self.tools.get(refresh=refresh)
        if listing is not self._registry.listing:  # built once per listing, not per request
            self._registry = Registry(listing)
        return self._registry

    async def listing(self, settings: GatewaySettings, principal: Principal) -> list[types.Tool]:
        """What `tools/list` answers this caller, by name."""
        registry = await self.current()
        high_risk_ok = may_run_high_risk(settings, principal)
        return [registry.listed[name] for name, t in registry.tools.items() if high_risk_ok or not t.high_risk]

    async def find(self, settings: GatewaySettings, principal: Principal, name: str) -> ToolDescriptor | None:
        """The tool if this caller may see it; a name not in the cache triggers one refresh."""
        tools = (await self.current()).tools
        if name not in tools:
            tools = (await self.current(refresh=True)).tools
        tool = tools.get(name)
        if tool is None or (tool.high_risk and not may_run_high_risk(settings, principal)):
            return None
        return tool

    def input_schema(self, settings: GatewaySettings, principal: Principal, name: str) -> Mapping[str, Any] | None:
        """The schema `tools/list` gave this caller for `name` (None: not listed to them), from the
        registry as it stands: the SDK asks it synchronously, to check `Mcp-Param-*` headers."""
        registry = self._registry
        tool = registry.tools.get(name)
        if tool is None or (tool.high_risk and not may_run_high_risk(settings, principal)):
            return None
        return registry.listed[name].input_schema
