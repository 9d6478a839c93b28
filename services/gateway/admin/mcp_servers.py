"""External MCP servers (admin CRUD): their headers are stored encrypted and never returned;
every change bumps the `mcp.servers` control document, which the MCP bridge of every tools-go
replica applies live."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from services.gateway.admin.control_publisher import bump
from services.gateway.ids import new_id
from services.gateway.pagination import Page, keyed_page
from services.gateway.problems import ApiProblem
from services.gateway.tables import McpServerRow, aware, now
from shared.contract.control_keys import MCP_SERVERS_KEY
from shared.contract.mcp import MCP_SERVER_NAME_PATTERN
from shared.secrets import encrypt_secret

HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$"  # an HTTP token
ToolNames = list[str]


class McpServerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=MCP_SERVER_NAME_PATTERN, description="namespace of its tools: `<name>.<tool>`")
    url: str = Field(max_length=1000, description="the server's streamable HTTP endpoint")
    headers: dict[str, str] | None = Field(
        default=None, description="write-only, stored encrypted; omit (or null) to keep the stored ones, {} to clear"
    )
    enabled: bool = True
    allow_tools: ToolNames = Field(default_factory=list, max_length=500, description="served tools; empty: all")
    deny_tools: ToolNames = Field(default_factory=list, max_length=500)
    high_risk_tools: ToolNames = Field(default_factory=list, max_length=500)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must be an http(s) URL")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if len(value) > 50:
            raise ValueError("at most 50 headers")
        for name, text in value.items():
            if not re.match(HEADER_NAME_PATTERN, name):
                raise ValueError(f"{name!r} is not a valid header name")
            if len(text) > 8192 or any(c in text for c in "\r\n\0"):
                raise ValueError(f"the value of {name!r} is too long or has line breaks")
        return value

    @field_validator("allow_tools", "deny_tools", "high_risk_tools")
    @classmethod
    def _tool_names(cls, value: ToolNames) -> ToolNames:
        if any(not name or len(name) > 200 for name in value):
            raise ValueError("tool names are 1 to 200 characters")
        return list(dict.fromkeys(value))  # duplicates are harmless: drop them


def view(row: McpServerRow) -> dict[str, Any]:
    """What the API shows: everything but the headers (only whether some are stored)."""
    return {
        "id": row.id,
        "name": row.name,
        "url": row.url,
        "has_headers": bool(row.headers_enc),
        "enabled": row.enabled,
        "allow_tools": list(row.allow_tools or []),
        "deny_tools": list(row.deny_tools or []),
        "high_risk_tools": list(row.high_risk_tools or []),
        "created_at": aware(row.created_at),
        "updated_at": aware(row.updated_at),
    }


def _changed(session: Session, by: str) -> None:
    bump(session, MCP_SERVERS_KEY, {}, by)


def _load(session: Session, server_id: str) -> McpServerRow:
    row = session.get(McpServerRow, server_id)
    if row is None:
        raise ApiProblem(404, "Not Found", f"No MCP server {server_id!r}.")
    return row


def _apply(row: McpServerRow, body: McpServerIn, secret: str) -> None:
    row.name, row.url, row.enabled = body.name, body.url, body.enabled
    row.allow_tools, row.deny_tools, row.high_risk_tools = body.allow_tools, body.deny_tools, body.high_risk_tools
    if body.headers is not None:
        row.headers_enc = encrypt_secret(json.dumps(body.headers), secret) if body.headers else None
    row.updated_at = now()


def _save(session: Session, row: McpServerRow, by: str) -> dict[str, Any]:
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise ApiProblem(409, "Conflict", f"An MCP server named {row.name!r} exists already.") from exc
    _changed(session, by)
    return view(row)


def create(session: Session, body: McpServerIn, secret: str, by: str) -> dict[str, Any]:
    if session.exec(select(McpServerRow).where(McpServerRow.name == body.name)).first() is not None:
        raise ApiProblem(409, "Conflict", f"An MCP server named {body.name!r} exists already.")
    row = McpServerRow(id=new_id("mcp"), name=body.name, url=body.url)
    _apply(row, body, secret)
    return _save(session, row, by)


def update(session: Session, server_id: str, body: McpServerIn, secret: str, by: str) -> dict[str, Any]:
    row = _load(session, server_id)
    _apply(row, body, secret)
    return _save(session, row, by)


def delete(session: Session, server_id: str, by: str) -> None:
    session.delete(_load(session, server_id))
    session.flush()
    _changed(session, by)


def get(session: Session, server_id: str) -> dict[str, Any]:
    return view(_load(session, server_id))


def list_page(session: Session, limit: int, cursor: str | None) -> Page:
    """Servers by name, a page at a time."""
    return keyed_page(session, McpServerRow, "name", limit, cursor, view)
