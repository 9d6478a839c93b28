"""External MCP servers (admin CRUD): their headers are stored encrypted and never returned;
every change bumps the `mcp.servers` control document, which the MCP bridge of every tools-go
replica applies live."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
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
    transport: Literal["http", "sse", "stdio"] | None = Field(
        default=None, description="http (Streamable HTTP) or sse (legacy HTTP+SSE) at `url`; stdio runs `command`; "
                                  "default: stdio with a command, else http")
    url: str | None = Field(default=None, max_length=1000, description="the server's endpoint (http, sse)")
    headers: dict[str, str] | None = Field(
        default=None, description="write-only, stored encrypted; omit (or null) to keep the stored ones, {} to clear"
    )
    command: str | None = Field(default=None, min_length=1, max_length=1000,
                                description="stdio: the program (an absolute path), run in the sandbox")
    args: list[str] = Field(default_factory=list, max_length=100)
    env: dict[str, str] | None = Field(default=None, description="stdio: its environment; write-only, encrypted")
    network: bool = Field(default=False, description="stdio: a network in its sandbox (else none)")
    read_paths: list[str] = Field(default_factory=list, max_length=50,
                                  description="stdio: host paths its sandbox may read (absolute)")
    memory_mb: int = Field(default=1024, ge=64, le=65536, description="stdio: its address-space limit")
    sampling: bool = Field(default=False, description="answer its sampling requests with the configured model")
    enabled: bool = True
    allow_tools: ToolNames = Field(default_factory=list, max_length=500, description="served tools; empty: all")
    deny_tools: ToolNames = Field(default_factory=list, max_length=500)
    high_risk_tools: ToolNames = Field(default_factory=list, max_length=500)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("url must be an http(s) URL")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("command must be an absolute path (the sandbox has no PATH to search)")
        return value

    @field_validator("read_paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        if any(not p.startswith("/") or p == "/" for p in value):
            raise ValueError("read_paths are absolute paths other than /")
        return value

    @model_validator(mode="after")
    def _transport(self) -> McpServerIn:
        if self.transport is None:
            self.transport = "stdio" if self.command is not None else "http"
        if self.transport == "stdio":
            if self.command is None or self.url is not None or self.headers:
                raise ValueError("a stdio server takes command (args, env), not url or headers")
        elif self.url is None or self.command is not None or self.env is not None or self.args:
            raise ValueError(f"an {self.transport} server takes url (headers), not command, args or env")
        return self

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and (len(value) > 100 or any(not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$", k)
                                                          or "\0" in v for k, v in value.items())):
            raise ValueError("env: at most 100 variables, names [A-Za-z_][A-Za-z0-9_]*, no NUL in values")
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
        "transport": row.transport,
        "url": row.url or None,
        "command": row.command,
        "args": list(row.args or []),
        "network": row.network,
        "read_paths": list(row.read_paths or []),
        "memory_mb": row.memory_mb,
        "sampling": row.sampling,
        "has_headers": bool(row.headers_enc) and row.transport != "stdio",
        "has_env": bool(row.headers_enc) and row.transport == "stdio",
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
    was = row.transport
    row.name, row.url, row.enabled = body.name, body.url or "", body.enabled
    row.transport, row.command, row.args = body.transport or "http", body.command, body.args
    row.network, row.read_paths, row.memory_mb = body.network, body.read_paths, body.memory_mb
    row.sampling = body.sampling
    row.allow_tools, row.deny_tools, row.high_risk_tools = body.allow_tools, body.deny_tools, body.high_risk_tools
    # One encrypted object: the headers of an HTTP server, the environment of a stdio one.
    secret_values = body.env if row.transport == "stdio" else body.headers
    if secret_values is not None:
        row.headers_enc = encrypt_secret(json.dumps(secret_values), secret) if secret_values else None
    elif (was == "stdio") != (row.transport == "stdio"):
        row.headers_enc = None  # headers are no environment, nor the other way round
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
    row = McpServerRow(id=new_id("mcp"), name=body.name, url=body.url or "")
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
