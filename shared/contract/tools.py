"""Tool discovery, requests and replies (request-reply on `P.tools.<go|py>.<tool>`)."""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import Field

from shared.contract.base import Contract

# `mcp`: a tool of an external MCP server, answered by the bridge on `P.tools.mcp.<server>.<tool>`.
ToolServiceName = Literal["go", "py", "mcp"]


class ToolAnnotations(Contract):
    """MCP's tool annotations (hints, never guarantees), named as MCP names them on the wire
    (`readOnlyHint`, …); `None` means the tool does not say."""

    read_only: bool | None = None  # readOnlyHint: it changes nothing
    destructive: bool | None = None  # destructiveHint: it may delete or overwrite
    idempotent: bool | None = None  # idempotentHint: calling twice with the same arguments does no more
    open_world: bool | None = None  # openWorldHint: it reaches beyond Agentix (the web, another system)


class ToolDescriptor(Contract):
    """MCP-compatible meanings: `input_schema` is JSON Schema of the arguments; `inject` names
    the arguments the dispatcher fills from the runtime (never shown to the model)."""

    name: str
    title: str
    description: str
    agent: bool = True
    input_schema: dict[str, Any] = Field(default_factory=dict)
    inject: list[str] = Field(default_factory=list)
    service: ToolServiceName
    high_risk: bool = False
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)

    def public_schema(self) -> dict[str, Any]:
        """The argument schema a caller sees — a model's function, an MCP client's tool: without
        the injected parameters (they come from the runtime or the token, never from the caller)
        and without a `title` of its own; always an object schema."""
        schema = copy.deepcopy(self.input_schema)
        schema.pop("title", None)
        props = schema.get("properties")
        if isinstance(props, dict):
            for name in self.inject:
                props.pop(name, None)
        required = schema.get("required")
        if isinstance(required, list):
            schema["required"] = [r for r in required if r not in self.inject]
            if not schema["required"]:
                schema.pop("required")
        schema["type"] = "object"
        schema.setdefault("properties", {})
        return schema


class ToolList(Contract):
    tools: list[ToolDescriptor]


class ToolMeta(Contract):
    """Who is calling: travels with every request so tools can scope data and log."""

    task_id: str | None = None
    node_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    # Set only by the gateway, from its verified principal: `user_id` may see and act on every
    # user's KBs, documents, memories and reports. Tools never read it from their arguments, and
    # the dispatcher never sets it (an agent's tool calls are the task owner's, admin or not).
    admin: bool = False


class ToolRequest(Contract):
    args: dict[str, Any] = Field(default_factory=dict)
    meta: ToolMeta = Field(default_factory=ToolMeta)


class ToolError(Contract):
    """`retryable`: the same call may succeed later (the service or server is restarting, a
    store is unreachable, the call timed out); false when the call itself is refused."""

    code: str
    message: str
    retryable: bool = False


class ToolReply(Contract):
    ok: bool
    result: Any = None
    error: ToolError | None = None

    @classmethod
    def success(cls, result: Any) -> ToolReply:
        return cls(ok=True, result=result)

    @classmethod
    def failure(cls, code: str, message: str, *, retryable: bool = False) -> ToolReply:
        return cls(ok=False, error=ToolError(code=code, message=message, retryable=retryable))
