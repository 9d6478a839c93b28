"""What an MCP caller sees of Agentix's tools: the agent-visible tools of every tool service
(`list_tools` over NATS, so a new tool shows up without a gateway change), less the high-risk
ones this caller may not run without an approval step, each without its injected parameters."""

from __future__ import annotations

import asyncio
import math
import time

import mcp_types as types

from services.gateway.principal import Principal
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolDescriptor
from shared.settings import GatewaySettings

# How long one `list_tools` round answers for: a new tool is listed within this, and a call does
# not pay a registry round trip (as the dispatcher caches it).
TOOLS_TTL_S = 5.0
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


class ToolCatalog:
    """The agent-visible tools by name, refreshed from the tool services at most every `ttl_s`
    (and at once when a caller names a tool not seen yet)."""

    def __init__(self, client: ToolClient, ttl_s: float = TOOLS_TTL_S) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._tools: dict[str, ToolDescriptor] = {}
        self._at = -math.inf
        self._lock = asyncio.Lock()

    async def _all(self, *, refresh: bool = False) -> dict[str, ToolDescriptor]:
        async with self._lock:
            if refresh or time.monotonic() - self._at > self.ttl_s:
                found = await self.client.list_tools()
                self._tools = {t.name: t for t in found if t.agent}
                self._at = time.monotonic()
            return self._tools

    async def visible(self, settings: GatewaySettings, principal: Principal) -> list[ToolDescriptor]:
        high_risk_ok = may_run_high_risk(settings, principal)
        return [t for t in (await self._all()).values() if high_risk_ok or not t.high_risk]

    async def find(self, settings: GatewaySettings, principal: Principal, name: str) -> ToolDescriptor | None:
        """The tool if this caller may see it; a name not in the cache triggers one refresh."""
        tools = await self._all()
        if name not in tools:
            tools = await self._all(refresh=True)
        tool = tools.get(name)
        if tool is None or (tool.high_risk and not may_run_high_risk(settings, principal)):
            return None
        return tool
