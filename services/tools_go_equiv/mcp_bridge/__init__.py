"""The MCP bridge: external MCP servers (registered through the gateway's admin API) served as
Agentix tools `<server>.<tool>` on `P.tools.mcp.<server>.<tool>`. tools-go hosts it."""
