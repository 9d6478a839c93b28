"""External MCP servers the bridge serves as Agentix tools: what the gateway publishes on the
control plane (`mcp.servers`) and every tools-go replica applies."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from shared.contract.base import Contract

# A server's name is a NATS subject token and the namespace of its tools (`<server>.<tool>`):
# no dots, no wildcards, no spaces.
MCP_SERVER_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class McpServerConfig(Contract):
    name: str = Field(pattern=MCP_SERVER_NAME_PATTERN)
    # `http`: Streamable HTTP at `url`; `sse`: the legacy HTTP+SSE transport at `url`; `stdio`:
    # `command` with `args`, started by the bridge in the sandbox (`shared/sandbox`).
    transport: Literal["http", "sse", "stdio"] = "http"
    url: str = ""
    # The HTTP headers sent with every request (e.g. Authorization) — for a stdio server, the
    # environment it starts with — as one JSON object encrypted with the deployment secret
    # (`shared.secrets`); only the bridge decrypts it.
    headers_enc: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    network: bool = False  # a stdio server's sandbox has a network (else none at all)
    read_paths: list[str] = Field(default_factory=list)  # host paths a stdio server may read
    memory_mb: int = 1024  # a stdio server's address-space limit
    sampling: bool = False  # its `sampling/createMessage` requests are answered by the configured model
    enabled: bool = True
    allow: list[str] = Field(default_factory=list)  # the server's tool names served; empty: all
    deny: list[str] = Field(default_factory=list)  # never served, even when allowed
    high_risk: list[str] = Field(default_factory=list)  # served as high-risk (an approval is needed)

    def serves(self, tool: str) -> bool:
        return (not self.allow or tool in self.allow) and tool not in self.deny


class McpServers(Contract):
    """The whole set, replaced at every change; `revision` only grows."""

    revision: int = 0
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)


class McpCancel(Contract):
    """Core publish on `P.mcp.cancel` by the gateway that received an MCP client's
    `notifications/cancelled`: the replica running that user's call with that JSON-RPC id
    cancels its task."""

    user_id: str
    request_id: str
