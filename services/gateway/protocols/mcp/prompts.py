"""The prompt library as MCP prompts: each prompt with an active version is one, its arguments the
`{{ name }}` variables of that version's text (every one required), `prompts/get` the text with
them filled in, as one user message. A prompt's arguments complete from nothing Agentix knows,
so `completion/complete` on them offers no values."""

from __future__ import annotations

import re
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.shared.exceptions import MCPError
from sqlmodel import Session, col, select

from services.gateway.pagination import decode_cursor, encode_cursor
from services.gateway.problems import ApiProblem
from services.gateway.tables import Prompt, PromptVersionRow

PAGE = 50
VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def variables(text: str) -> list[str]:
    """The names of the `{{ name }}` variables, in order of first use."""
    return list(dict.fromkeys(VARIABLE.findall(text)))


def render(text: str, values: dict[str, str]) -> str:
    return VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _listed(session: Session, limit: int, cursor: str | None) -> tuple[list[tuple[str, str]], str | None]:
    query = (select(Prompt.name, PromptVersionRow.text)
             .join(PromptVersionRow, (col(PromptVersionRow.name) == col(Prompt.name))
                   & (col(PromptVersionRow.version) == col(Prompt.active_version)))
             .order_by(col(Prompt.name)).limit(limit + 1))  # fmt: skip
    if cursor:
        query = query.where(col(Prompt.name) > decode_cursor(cursor))
    rows = [(name, text) for name, text in session.exec(query)]
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1][0]) if more else None


def _active(session: Session, name: str) -> str | None:
    prompt = session.get(Prompt, name)
    if prompt is None or prompt.active_version is None:
        return None
    row = session.get(PromptVersionRow, (name, prompt.active_version))
    return row.text if row is not None else None


def mcp_prompt(name: str, text: str) -> types.Prompt:
    return types.Prompt(
        name=name,
        title=name,
        description=f"The active version of the prompt library's {name!r}",
        arguments=[types.PromptArgument(name=v, required=True) for v in variables(text)],
    )


class McpPrompts:
    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def listing(self, cursor: str | None) -> types.ListPromptsResult:
        try:
            rows, nxt = await self.app.state.db.run(_listed, PAGE, cursor)
        except ApiProblem as problem:  # a cursor that is not ours
            raise MCPError(types.INVALID_PARAMS, problem.detail) from problem
        return types.ListPromptsResult(prompts=[mcp_prompt(n, t) for n, t in rows], next_cursor=nxt)

    async def get(self, name: str, arguments: dict[str, Any] | None) -> types.GetPromptResult:
        text = await self.app.state.db.run(_active, name)
        if text is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name}")
        values = {k: str(v) for k, v in (arguments or {}).items()}
        wanted = variables(text)
        missing = [v for v in wanted if v not in values]
        if missing:
            raise MCPError(types.INVALID_PARAMS, f"Prompt {name!r} needs the argument(s): {', '.join(missing)}")
        unknown = sorted(set(values) - set(wanted))
        if unknown:
            raise MCPError(types.INVALID_PARAMS, f"Prompt {name!r} has no argument(s): {', '.join(unknown)}")
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=render(text, values)))
        return types.GetPromptResult(description=mcp_prompt(name, text).description, messages=[message])
