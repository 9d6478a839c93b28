"""The gateway's tables (it owns users, tasks, workflows, control-plane config, audit and
guardrail events). Changed only through alembic migrations in `migrations/`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Text, UniqueConstraint
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel


class GatewayModel(SQLModel, registry=registry()):
    """Own metadata, so the gateway's migrations never see another service's tables."""


metadata = GatewayModel.metadata


def now() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _ts(nullable: bool = True, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=nullable, index=index))


def _stamp(index: bool = False) -> Any:
    return Field(default_factory=now, sa_column=Column(DateTime(timezone=True), nullable=False, index=index))


def _json(default: Any = None) -> Any:
    if callable(default):
        return Field(default_factory=default, sa_column=Column(JSON, nullable=True))
    return Field(default=default, sa_column=Column(JSON, nullable=True))


class User(GatewayModel, table=True):
    __tablename__ = "users"

    id: str = Field(primary_key=True, max_length=64)
    password_hash: str = Field(sa_column=Column(Text, nullable=False))
    role: str = Field(default="user", max_length=16)
    disabled: bool = False
    # The model of the user's chat runs when neither the message nor the conversation names one.
    default_model: str | None = Field(default=None, max_length=200)
    created_at: datetime = _stamp()

    @property
    def name(self) -> str:
        return self.id

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


class Task(GatewayModel, table=True):
    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_user_created", "user_id", "created_at"),)

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)
    status: str = Field(default="submitted", index=True, max_length=32)
    workflow_id: str | None = Field(default=None, max_length=64)
    dsl: dict[str, Any] = _json(dict)
    input: dict[str, Any] = _json(dict)
    options: dict[str, Any] = _json(dict)
    output: Any = _json()
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    error_code: str | None = Field(default=None, max_length=64)
    usage: dict[str, Any] = _json(dict)
    chain_revision: int | None = None
    prompt_versions: dict[str, Any] | None = _json()
    guardrail_grey: list[str] = _json(list)
    retry: int = 0
    idempotency_key: str | None = Field(default=None, max_length=255)
    session_id: str | None = Field(default=None, max_length=128)
    # What started the task when no person did (migration 0016): `{kind: schedule, id, fired_at}`
    # or `{kind: hook, id, delivery_id}`; None for a task posted by a user.
    trigger: dict[str, Any] | None = _json(None)
    created_at: datetime = _stamp(index=True)
    # Set once the task message is on the queue; a row without it is re-published later.
    queued_at: datetime | None = _ts()
    queue_seq: int | None = None  # stream sequence of the queued message (cancel removes it)
    started_at: datetime | None = _ts()
    finished_at: datetime | None = _ts(index=True)
    updated_at: datetime | None = _ts()


class TaskNode(GatewayModel, table=True):
    __tablename__ = "task_nodes"

    task_id: str = Field(primary_key=True, max_length=64)
    node_id: str = Field(primary_key=True, max_length=64)
    kind: str | None = Field(default=None, max_length=32)
    status: str = Field(default="pending", max_length=32)
    started_at: datetime | None = _ts()
    finished_at: datetime | None = _ts()
    duration_ms: float | None = None
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    output_preview: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class IdempotencyKey(GatewayModel, table=True):
    __tablename__ = "idempotency_keys"

    user_id: str = Field(primary_key=True, max_length=64)
    key: str = Field(primary_key=True, max_length=255)
    task_id: str = Field(max_length=64)
    created_at: datetime = _stamp()


class Workflow(GatewayModel, table=True):
    __tablename__ = "workflows"

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=200)
    dsl: dict[str, Any] = _json(dict)
    created_at: datetime = _stamp()
    updated_at: datetime = _stamp()


class WorkflowVersion(GatewayModel, table=True):
    """Each save of a workflow (create or update) as it was: its DSL and the canvas layout."""

    __tablename__ = "workflow_versions"
    __table_args__ = (UniqueConstraint("workflow_id", "version", name="uq_workflow_versions_workflow_version"),)

    id: int | None = Field(default=None, primary_key=True)
    workflow_id: str = Field(index=True, max_length=64)
    version: int
    name: str = Field(max_length=200)
    dsl: dict[str, Any] = _json(dict)
    layout: dict[str, Any] | None = _json(None)
    created_by: str = Field(max_length=64)
    created_at: datetime = _stamp()


class LgAssistant(GatewayModel, table=True):
    """An assistant made through `/lg` (`POST /assistants`): the chat agent with a config of its
    own; `version` is the one in use (`POST /assistants/{id}/latest` picks another)."""

    __tablename__ = "lg_assistants"

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)
    graph_id: str = Field(max_length=64)
    name: str = Field(max_length=200)
    description: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    config: dict[str, Any] = _json(dict)
    context: dict[str, Any] = _json(dict)
    meta: dict[str, Any] = _json(dict)
    version: int = 1
    created_at: datetime = _stamp()
    updated_at: datetime = _stamp()


class LgAssistantVersion(GatewayModel, table=True):
    """Each version of an `/lg` assistant as it was made (create, then each update)."""

    __tablename__ = "lg_assistant_versions"
    __table_args__ = (UniqueConstraint("assistant_id", "version", name="uq_lg_assistant_versions_version"),)

    id: int | None = Field(default=None, primary_key=True)
    assistant_id: str = Field(index=True, max_length=64)
    version: int
    graph_id: str = Field(max_length=64)
    name: str = Field(max_length=200)
    description: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    config: dict[str, Any] = _json(dict)
    context: dict[str, Any] = _json(dict)
    meta: dict[str, Any] = _json(dict)
    created_at: datetime = _stamp()


class AuditEntry(GatewayModel, table=True):
    __tablename__ = "audit_log"

    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = _stamp(index=True)
    user_id: str | None = Field(default=None, max_length=64, index=True)
    method: str = Field(max_length=8)
    route: str = Field(max_length=300)
    target: str | None = Field(default=None, max_length=300)
    status: int
    outcome: str = Field(max_length=16)
    request_id: str | None = Field(default=None, max_length=128)
    ip: str | None = Field(default=None, max_length=64)
    key_id: str | None = Field(default=None, max_length=64)  # the API key that acted (None: a bearer token)


class GuardrailEventRow(GatewayModel, table=True):
    __tablename__ = "guardrail_events"

    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = _stamp(index=True)
    user_id: str | None = Field(default=None, max_length=64)
    tier: int = 1
    action: str = Field(max_length=16)
    rule: str = Field(max_length=100)
    reason: str = Field(sa_column=Column(Text, nullable=False))
    route: str | None = Field(default=None, max_length=300)
    task_id: str | None = Field(default=None, max_length=64)
    request_id: str | None = Field(default=None, max_length=128)


class ModelRow(GatewayModel, table=True):
    __tablename__ = "model_configs"
    __table_args__ = (UniqueConstraint("name", name="uq_model_configs_name"),)

    id: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=100)
    provider: str = Field(default="openai", max_length=32)
    base_url: str | None = Field(default=None, max_length=500)
    model: str = Field(max_length=200)
    api_key_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    params: dict[str, Any] = _json(dict)
    enabled: bool = True
    created_at: datetime = _stamp()
    updated_at: datetime = _stamp()


class ControlValue(GatewayModel, table=True):
    """The latest value of a control-plane document (`models.chain`, `pricing`) and its revision."""

    __tablename__ = "control_values"

    key: str = Field(primary_key=True, max_length=100)
    value: dict[str, Any] = _json(dict)
    revision: int = 0
    updated_by: str | None = Field(default=None, max_length=64)
    updated_at: datetime = _stamp()


class Prompt(GatewayModel, table=True):
    __tablename__ = "prompts"

    name: str = Field(primary_key=True, max_length=100)
    active_version: int | None = None
    canary_version: int | None = None
    canary_percent: int = 0
    revision: int = 0
    updated_at: datetime = _stamp()


class PromptVersionRow(GatewayModel, table=True):
    __tablename__ = "prompt_versions"

    name: str = Field(primary_key=True, max_length=100)
    version: int = Field(primary_key=True)
    text: str = Field(sa_column=Column(Text, nullable=False))
    note: str | None = Field(default=None, max_length=500)
    created_by: str | None = Field(default=None, max_length=64)
    created_at: datetime = _stamp()


class McpServerRow(GatewayModel, table=True):
    """An external MCP server whose tools the bridge serves (`<name>.<tool>`)."""

    __tablename__ = "mcp_servers"
    __table_args__ = (UniqueConstraint("name", name="uq_mcp_servers_name"),)

    id: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=63)
    url: str = Field(max_length=1000)  # "" for a stdio server
    headers_enc: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # write-only
    enabled: bool = True
    transport: str = Field(default="http", max_length=10)  # http | sse | stdio
    command: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    args: list[str] = _json(list)
    network: bool = False
    read_paths: list[str] = _json(list)
    memory_mb: int = 1024
    sampling: bool = False
    allow_tools: list[str] = _json(list)
    deny_tools: list[str] = _json(list)
    high_risk_tools: list[str] = _json(list)
    created_at: datetime = _stamp()
    updated_at: datetime = _stamp()


class ApiKey(GatewayModel, table=True):
    """A user's long-lived API key (`access/api_keys.py`): only its HMAC is stored, with the
    first characters (`prefix`) to recognise it by."""

    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(index=True, max_length=64)
    name: str = Field(max_length=100)
    prefix: str = Field(max_length=16)
    hash: str = Field(max_length=64, unique=True)
    scopes: list[str] = _json(list)
    admin: bool = False  # the creator was an administrator (the `admin` scope needs it)
    created_at: datetime = _stamp()
    last_used_at: datetime | None = _ts()
    expires_at: datetime | None = _ts()
    revoked_at: datetime | None = _ts()
