"""All configuration, from the environment (prefix `AGENTIX_`) with sane embedded defaults."""

from __future__ import annotations

import json
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

VERSION = "0.1.0"


def _split_list(value: object) -> object:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def _split_patterns(value: object) -> object:
    """Regexes from the environment: a JSON list, or comma-separated at the top level only, so
    `sk-[a-z]{16,}` keeps its comma."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    parts, depth, current, escaped = [], 0, [], False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIX_", extra="ignore")

    # Bus
    nats_servers: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["nats://127.0.0.1:4222"])
    subject_prefix: str = "agentix"
    js_replicas: int = 1
    nats_connect_timeout_s: float = 10.0
    heartbeat_interval_s: float = 5.0
    events_max_age_s: int = 24 * 3600
    events_max_bytes: int = 1024 * 1024 * 1024
    task_ack_wait_s: float = 30.0
    task_max_deliver: int = 5
    task_max_ack_pending: int = 64
    # Tasks whose row was written but whose publish failed (NATS down) are re-published this
    # often, once they are at least `task_requeue_min_age_s` old (the message id dedupes).
    task_requeue_interval_s: float = 30.0
    task_requeue_min_age_s: float = 5.0
    ingest_ack_wait_s: float = 30.0
    ingest_max_deliver: int = 3
    ingest_max_ack_pending: int = 8
    tool_timeout_s: float = 30.0
    tool_concurrency: int = 16

    # Storage
    data_dir: Path = Path(".agentix")
    gateway_db_url: str | None = None
    tools_db_url: str | None = None
    redis_url: str | None = None
    redis_key_prefix: str = "agentix:"

    # Security
    jwt_secret: str | None = None
    jwt_ttl_s: int = 12 * 3600
    secret_key: str | None = None
    auth_disabled: bool = False
    dev_user: str = "dev"
    admin_users: Annotated[list[str], NoDecode] = Field(default_factory=list)
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    rate_limit_per_min: int = 120
    # Extra tier-1 guardrail terms (comma-separated), blocked as whole words on task input.
    guardrail_blocklist: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # Models
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str | None = None
    default_token_budget: int = 200_000
    # Attempts per model before failing over (429/5xx/timeouts), and the circuit breakers.
    llm_retry_attempts: int = Field(default=3, ge=1)
    breaker_failure_threshold: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=30.0, gt=0)
    # Extra secret patterns (regexes) for the redactor, besides the built-in API-key/token ones:
    # a JSON list, or comma-separated (commas inside {}, [] or () stay part of the pattern).
    redact_patterns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    default_task_timeout_s: float = 3600.0
    task_parallelism: int = 8

    # Observability
    otlp_endpoint: str | None = None
    log_level: str = "INFO"

    @field_validator("nats_servers", "admin_users", "cors_origins", "guardrail_blocklist", mode="before")
    @classmethod
    def _lists(cls, value: object) -> object:
        return _split_list(value)

    @field_validator("redact_patterns", mode="before")
    @classmethod
    def _patterns(cls, value: object) -> object:
        return _split_patterns(value)

    # Derived names: every subject, stream and bucket is derived from the prefix so several
    # deployments (or test runs) can share one NATS.
    @property
    def stream_prefix(self) -> str:
        return self.subject_prefix.upper().replace("-", "_").replace(".", "_")

    @property
    def bucket_prefix(self) -> str:
        return self.subject_prefix.lower().replace("-", "_").replace(".", "_")

    def db_url(self, owner: str) -> str:
        """The database of an owning service: its own setting, else its own SQLite file."""
        explicit = {"gateway": self.gateway_db_url, "tools": self.tools_db_url}.get(owner)
        if explicit:
            return explicit
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / f'{owner}.db').resolve()}"

    def persistent_secret(self, name: str) -> str:
        """A secret from settings or, when unset, generated once and kept in the data dir."""
        value = {"jwt_secret": self.jwt_secret, "secret_key": self.secret_key}.get(name)
        if value:
            return value
        path = self.data_dir / name
        if path.exists():
            return path.read_text().strip()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        value = secrets.token_urlsafe(48)
        path.touch(mode=0o600)
        path.write_text(value)
        return value


@lru_cache
def get_settings() -> Settings:
    return Settings()
