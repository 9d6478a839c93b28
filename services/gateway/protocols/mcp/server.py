"""The MCP server behind `/mcp`: `tools/list` and `tools/call` over Agentix's tool services.

A call goes over NATS like any tool call (queue groups, the bus's timeout, trace headers); the
caller is the principal the endpoint verified, never anything in the arguments: injected
parameters are dropped from what the client sent and filled from the token. A tool's failure
is an `isError` result with the tool's message, never a protocol error."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.gateway.access.principal import Principal
from services.gateway.protocols.mcp import caller
from services.gateway.protocols.mcp.agent_tool import NAME as ASK_AGENT
from services.gateway.protocols.mcp.catalog import ToolCatalog
from services.gateway.protocols.mcp.reads import McpReads
from services.gateway.protocols.mcp.subscriptions import McpSubscriptions
from services.gateway.protocols.mcp.workflow_tools import PREFIX as WORKFLOW_PREFIX
from services.gateway.protocols.mcp.workflow_tools import McpWorkflows
from shared.bus.tools import ToolClient
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply
from shared.settings import VERSION, GatewaySettings
from shared.telemetry import span

TOOLS_PAGE = 100  # tools per `tools/list` page
# Stateless MCP has no conversation of its own: the history tools' `session_id` is this one per user.
MCP_SESSION = "mcp"
# The methods that change nothing; `tools/call` changes nothing when its tool is read-only.
READ_ONLY_METHODS = frozenset({"initialize", "ping", "tools/list", "notifications/initialized", "resources/list",
                               "resources/templates/list", "resources/read", "prompts/list", "prompts/get",
                               "completion/complete", "logging/setLevel"})
# The caller of the request being served, for the SDK's schema lookup (which is given a tool name
# only); set by the endpoint in the request's own task, so concurrent requests never see another's.
_caller: ContextVar[Principal | None] = ContextVar("mcp_caller", default=None)
INSTRUCTIONS = (
    "Agentix's tools: knowledge-base search, long-term memory, conversation history, reports and "
    "document parsing; as resources, your workflows, conversations, reports and knowledge-base "
    "documents; as prompts, the prompt library. Everything acts as the user of the bearer token."
)


def tool_args(tool: ToolDescriptor, arguments: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """The client's arguments without the injected names, then those filled from the token."""
    values = {"user_id": principal.id, "session_id": MCP_SESSION}
    args = {k: v for k, v in arguments.items() if k not in tool.inject}
    for name in tool.inject:
        if name in values:
            args[name] = values[name]
    return args


def tool_result(reply: ToolReply) -> types.CallToolResult:
    if reply.ok:
        text = json.dumps(reply.result, ensure_ascii=False, default=str)
        structured = reply.result if isinstance(reply.result, dict) else None
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)
    code = reply.error.code if reply.error else "error"
    message = reply.error.message if reply.error else "the tool failed"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": {"code": code, "message": message}},
        is_error=True,
    )


def _cursor_at(offset: int) -> str:
    return base64.urlsafe_b64encode(f"tools:{offset}".encode()).decode().rstrip("=")


def _offset(cursor: str | None) -> int:
    """Where a `tools/list` page starts: the cursor of the page before (an offset in the listing
    as it stands: a tool added meanwhile may shift it by one), or 0."""
    if not cursor:
        return 0
    try:
        kind, _, offset = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().partition(":")
        if kind != "tools" or not offset.isdigit():
            raise ValueError(cursor)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MCPError(types.INVALID_PARAMS, "The cursor is not valid.") from exc
    return int(offset)


def _failure(code: str, message: str) -> types.CallToolResult:
    return tool_result(ToolReply.failure(code, message))


class McpTools:
    """The handlers; the catalog and tool client live as long as the gateway's bus."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._catalog: ToolCatalog | None = None
        self.workflows = McpWorkflows(app)

    @property
    def settings(self) -> GatewaySettings:
        return self.app.state.settings

    def catalog(self) -> ToolCatalog | None:
        bus = getattr(self.app.state, "bus", None)
        if bus is None or not bus.nc.is_connected:
            return None
        if self._catalog is None or self._catalog.client.bus is not bus:
            self._catalog = ToolCatalog(ToolClient(bus))
        return self._catalog

    async def prepare(self, principal: Principal, method: str | None, name: str | None) -> None:
        """Before the SDK serves a request: name its caller for `input_schema`; and for a
        2026-protocol `tools/call` (its `Mcp-Method` and `Mcp-Name` headers, which the SDK checks
        against the body) have the registry know that tool, as the call itself would."""
        _caller.set(principal)
        catalog = self.catalog()
        if method == "tools/call" and name is not None and catalog is not None:
            await catalog.find(self.settings, principal, name)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The SDK's `get_tool_input_schema`: the schema this caller was listed for `name`, against
        which it checks a 2026-protocol call's `Mcp-Param-*` headers. Without it the SDK runs a
        whole `tools/list` (every tool's MCP form, serialised) before each such call."""
        principal = _caller.get()
        catalog = self.catalog()
        if principal is None or catalog is None:
            return None  # the call itself answers (unauthorised or unavailable)
        return catalog.input_schema(self.settings, principal, name)

    async def audit_method(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: every MCP POST's audit row names its method (a call, its tool)."""
        caller.audit(ctx, f"mcp={ctx.method}", read_only=ctx.method in READ_ONLY_METHODS)
        return await call_next(ctx)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal = caller.principal(ctx)
        catalog = self.catalog()
        if catalog is None:
            raise MCPError(types.INTERNAL_ERROR, "The message bus is not connected; try again shortly.")
        start = _offset(params.cursor if params is not None else None)
        workflows = await self.workflows.listing(Principal(id=principal.id))
        tools = [*workflows, *await catalog.listing(self.settings, principal)]
        page = tools[start : start + TOOLS_PAGE]
        more = start + TOOLS_PAGE < len(tools)
        return types.ListToolsResult(tools=page, next_cursor=_cursor_at(start + TOOLS_PAGE) if more else None)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        principal = caller.principal(ctx)
        caller.audit(ctx, f"tool={params.name}")
        catalog = self.catalog()
        if catalog is None:
            return _failure("unavailable", "The message bus is not connected; try again shortly.")
        # Runs (a workflow, the agent): as the user, without admin rights, like every call.
        if params.name.startswith(WORKFLOW_PREFIX) or params.name == ASK_AGENT:
            ran = await self.workflows.call(ctx, Principal(id=principal.id), params.name, dict(params.arguments or {}))
            return ran if ran is not None else _failure("unknown_tool", f"Unknown tool: {params.name}")
        tool = await catalog.find(self.settings, principal, params.name)
        if tool is None:  # hidden high-risk tools answer exactly as unknown ones
            return _failure("unknown_tool", f"Unknown tool: {params.name}")
        caller.audit(ctx, f"tool={params.name}", read_only=tool.annotations.read_only is True)
        args = tool_args(tool, dict(params.arguments or {}), principal)
        # An MCP client is an agent: like a task's tool calls, its calls never carry admin rights
        # (an admin's token reaches the admin's own data here, never other users').
        meta = ToolMeta(user_id=principal.id, session_id=MCP_SESSION)
        attributes = {"messaging.system": "nats", "agentix.tool": tool.name, "agentix.via": "mcp"}
        with span(f"tool.call {tool.name}", attributes, SpanKind.CLIENT) as current:
            reply = await catalog.client.call(tool.name, args, meta)
            if not reply.ok:
                current.set_status(Status(StatusCode.ERROR, reply.error.code if reply.error else "error"))
        if not reply.ok:
            caller.audit(ctx, f"tool={tool.name} error={reply.error.code if reply.error else 'error'}",
                   read_only=tool.annotations.read_only is True)
        return tool_result(reply)


class AgentixServer(Server[Any]):
    """The SDK's server, announcing at `initialize` what sessions get: `notifications/tools/list_changed`
    and `notifications/resources/list_changed` on the session's GET stream (`notifications.py`)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=True, resources_changed=True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


def build_server(tools: McpTools, reads: McpReads, subscriptions: McpSubscriptions) -> Server[Any]:
    # No lifespan of its own: `single_exchange` serves requests with the default's empty state.
    server: Server[Any] = AgentixServer(
        "agentix",
        version=VERSION,
        title="Agentix",
        instructions=INSTRUCTIONS,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
        get_tool_input_schema=tools.input_schema,
        on_list_resources=reads.list_resources,
        on_list_resource_templates=reads.list_resource_templates,
        on_read_resource=reads.read_resource,
        on_list_prompts=reads.list_prompts,
        on_get_prompt=reads.get_prompt,
        on_completion=reads.complete,
        on_set_logging_level=reads.set_logging_level,
        on_subscribe_resource=subscriptions.subscribe,
        on_unsubscribe_resource=subscriptions.unsubscribe,
    )
    server.middleware.append(tools.audit_method)
    return server
