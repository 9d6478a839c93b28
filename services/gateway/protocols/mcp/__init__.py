"""Agentix as an MCP server: `/mcp` on the gateway (see docs/API.md, "MCP")."""

from services.gateway.protocols.mcp.endpoint import mount_mcp

__all__ = ["mount_mcp"]
