"""The MCP handlers beside the tools: resources, prompts, `completion/complete` and
`logging/setLevel`, each as the caller of the POST (`caller.principal`), never with admin rights."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from services.gateway.access.principal import Principal
from services.gateway.protocols.mcp import caller
from services.gateway.protocols.mcp.prompts import McpPrompts
from services.gateway.protocols.mcp.resources import TEMPLATES, McpResources

MAX_COMPLETIONS = 100  # the spec's cap on `completion.values`


def _as_user(ctx: ServerRequestContext[Any, Any]) -> Principal:
    # Like MCP tool calls, resources and prompts never carry admin rights: an admin reads their own.
    return Principal(id=caller.principal(ctx).id)


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


class McpReads:
    def __init__(self, app: FastAPI) -> None:
        self.resources = McpResources(app)
        self.prompts = McpPrompts(app)

    async def list_resources(self, ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:  # fmt: skip
        return await self.resources.listing(_as_user(ctx), _cursor(params))

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        caller.principal(ctx)
        if _cursor(params):  # one page holds them all: no cursor of ours names a further one
            raise MCPError(types.INVALID_PARAMS, "The cursor is not valid.")
        return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)

    async def read_resource(self, ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:  # fmt: skip
        caller.audit(ctx, f"resource={params.uri}", read_only=True)
        return await self.resources.read(_as_user(ctx), str(params.uri))

    async def list_prompts(self, ctx: ServerRequestContext[Any, Any],
                           params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:  # fmt: skip
        caller.principal(ctx)
        return await self.prompts.listing(_cursor(params))

    async def get_prompt(self, ctx: ServerRequestContext[Any, Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:  # fmt: skip
        caller.principal(ctx)
        caller.audit(ctx, f"prompt={params.name}", read_only=True)
        return await self.prompts.get(params.name, params.arguments)

    async def complete(self, ctx: ServerRequestContext[Any, Any],
                       params: types.CompleteRequestParams) -> types.CompleteResult:  # fmt: skip
        who = _as_user(ctx)
        values: list[str] = []
        ref = params.ref
        if isinstance(ref, types.ResourceTemplateReference):
            context = dict(params.context.arguments or {}) if params.context is not None else {}
            values = await self.resources.complete(who, ref.uri, params.argument.name, params.argument.value, context)
        # A prompt's arguments (a known prompt's or not) have no values Agentix knows: none offered.
        return types.CompleteResult(completion=types.Completion(
            values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS))

    async def set_logging_level(self, ctx: ServerRequestContext[Any, Any],
                                params: types.SetLevelRequestParams) -> types.EmptyResult:  # fmt: skip
        # Stateless: nothing outlives the POST, so there is no session to keep a level in; log lines
        # go only on a tool call's own stream (see docs/API.md), at the level its request names.
        caller.principal(ctx)
        return types.EmptyResult()
