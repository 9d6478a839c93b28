"""MCP's shapes to Agentix's: a listed tool to a `ToolDescriptor`, a tool result to a `ToolReply`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from shared.contract.mcp import McpServerConfig
from shared.contract.tools import ToolAnnotations, ToolDescriptor, ToolReply

if TYPE_CHECKING:  # the types arrive with the SDK, which only a connection loads
    import mcp_types

# Bridged tools are NATS subject tokens after `<server>.`: a name with anything else (a space, a
# wildcard, an empty token) cannot be served and is left out.
SERVABLE_NAME = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
MAX_ERROR_CHARS = 2000


def bridged_name(server: str, tool: str) -> str:
    return f"{server}.{tool}"


def servable(config: McpServerConfig, tool: str) -> bool:
    return bool(SERVABLE_NAME.match(tool)) and config.serves(tool)


def descriptor(config: McpServerConfig, tool: mcp_types.Tool) -> ToolDescriptor:
    hints = tool.annotations
    title = tool.title or (hints.title if hints else None) or tool.name
    return ToolDescriptor(
        name=bridged_name(config.name, tool.name),
        title=title,
        description=tool.description or title,
        input_schema=dict(tool.input_schema or {}),
        service="mcp",
        # Annotations are the server's hints, never trusted for safety: only the admin's list
        # makes a bridged tool high-risk.
        high_risk=tool.name in config.high_risk,
        annotations=ToolAnnotations(
            read_only=hints.read_only_hint if hints else None,
            destructive=hints.destructive_hint if hints else None,
            idempotent=hints.idempotent_hint if hints else None,
            open_world=hints.open_world_hint if hints else None,
        ),
    )


def _texts(result: mcp_types.CallToolResult) -> list[str] | None:
    """The text of every content block, or None when some block is not text."""
    import mcp_types  # already loaded: `result` came from the SDK

    texts: list[str] = []
    for block in result.content:
        if not isinstance(block, mcp_types.TextContent):
            return None
        texts.append(block.text)
    return texts


def reply(name: str, result: mcp_types.CallToolResult) -> ToolReply:
    """Structured content when the tool gives it, else its text, else its content blocks as JSON.
    A result flagged `isError` is a tool error carrying the tool's own words."""
    texts = _texts(result)
    if result.is_error:
        said = "\n".join(texts) if texts else "the MCP tool reported an error"
        return ToolReply.failure("tool_error", f"{name}: {said}"[:MAX_ERROR_CHARS])
    if result.structured_content is not None:
        return ToolReply.success(result.structured_content)
    if texts is not None:
        return ToolReply.success("\n".join(texts))
    blocks: list[Any] = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
    return ToolReply.success(blocks)
