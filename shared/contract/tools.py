"""Tool discovery, requests and replies (request-reply on `P.tools.<go|py>.<tool>`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.contract.base import Contract

ToolServiceName = Literal["go", "py"]


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
    code: str
    message: str


class ToolReply(Contract):
    ok: bool
    result: Any = None
    error: ToolError | None = None

    @classmethod
    def success(cls, result: Any) -> ToolReply:
        return cls(ok=True, result=result)

    @classmethod
    def failure(cls, code: str, message: str) -> ToolReply:
        return cls(ok=False, error=ToolError(code=code, message=message))
