"""All configuration, from the environment (prefix `AGENTIX_`) with sane embedded defaults.

`CommonSettings` is what every service reads (the bus and its streams, the data dir, logs and
traces). Each service loads its own class with only what it uses on top of that:
`GatewaySettings`, `DispatcherSettings`, `ToolsGoSettings`, `ToolsPySettings`. `Settings` has
every field of every service, for what configures several services from one environment (the
`agentix` command, tests); since it subclasses each service's class, it can be handed to any
service. The same variable always means the same thing, whichever class reads it."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

VERSION = "0.1.0"
# A work queue's ack wait, in heartbeat intervals, unless set (see CommonSettings).
LEASE_HEARTBEATS = 1.5
# Below this a lease would lapse on a busy event loop rather than a dead worker.
MIN_DERIVED_ACK_WAIT_S = 1.0


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


class CommonSettings(BaseSettings):
    """What every service uses: `Bus.declare()` declares every stream and consumer, so the stream
    and consumer settings of all work queues are here too."""

    model_config = SettingsConfigDict(env_prefix="AGENTIX_", extra="ignore")

    # Bus
    nats_servers: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["nats://127.0.0.1:4222"])
    subject_prefix: str = "agentix"
    js_replicas: int = 1
    # One attempt at reaching NATS: what a command (`agentix …`) waits before it fails; a service
    # tries again and again until NATS answers, with no upper bound (docs/FAULTS.md).
    nats_connect_timeout_s: float = Field(default=10.0, gt=0)
    # How long a service waits at start for each stream, consumer and bucket to be declared on a
    # cluster that is still forming (no meta leader, too few peers yet); then it exits with the
    # reason. 0: no limit.
    declare_timeout_s: float = Field(default=120.0, ge=0)
    heartbeat_interval_s: float = 5.0
    events_max_age_s: int = 24 * 3600
    events_max_bytes: int = 1024 * 1024 * 1024
    # 0: LEASE_HEARTBEATS heartbeat intervals. Work held by a worker that died is handed to
    # another when its lease lapses, so the ack wait is what takeover takes (renewed at a third).
    task_ack_wait_s: float = 0.0
    task_max_deliver: int = 5
    # Task messages handed out and not yet answered, across ALL dispatchers: the deployment's cap
    # on runs at once (a run parked for an approval has answered its message and does not
    # count). Each dispatcher takes at most its own `dispatcher_max_runs`; keep this at least
    # replicas × that, or it is the tighter bound. The declaring service updates the consumer.
    task_max_ack_pending: int = 4096
    ingest_ack_wait_s: float = 0.0
    ingest_max_deliver: int = 3
    # A completion callback's delivery attempt is redelivered to another gateway when the one
    # holding it has not answered for this long (it died mid-attempt); keep it above
    # `callback_timeout_s`.
    callback_ack_wait_s: float = Field(default=30.0, gt=0)
    ingest_max_ack_pending: int = 8
    tool_timeout_s: float = 30.0
    tool_concurrency: int = 16

    # Storage
    data_dir: Path = Path(".agentix")

    # Observability
    otlp_endpoint: str | None = None
    log_level: str = "INFO"

    @field_validator("nats_servers", mode="before")
    @classmethod
    def _servers(cls, value: object) -> object:
        return _split_list(value)

    @model_validator(mode="after")
    def _leases_follow_heartbeats(self) -> CommonSettings:
        # A lapsed lease (ack wait after the last renewal) plus one fetch stays inside two
        # heartbeat intervals: the takeover time an operator is promised (docs/BUS.md).
        for field in ("task_ack_wait_s", "ingest_ack_wait_s"):
            if getattr(self, field) <= 0:
                derived = LEASE_HEARTBEATS * self.heartbeat_interval_s
                setattr(self, field, round(max(MIN_DERIVED_ACK_WAIT_S, derived), 3))
        return self

    # Derived names: every subject, stream and bucket is derived from the prefix so several
    # deployments (or test runs) can share one NATS.
    @property
    def stream_prefix(self) -> str:
        return self.subject_prefix.upper().replace("-", "_").replace(".", "_")

    @property
    def bucket_prefix(self) -> str:
        return self.subject_prefix.lower().replace("-", "_").replace(".", "_")

    def db_url(self, owner: str) -> str:
        """The database of an owning service: its own `<owner>_db_url` setting, else its own
        SQLite file in the data dir."""
        explicit = getattr(self, f"{owner}_db_url", None)
        if explicit:
            return str(explicit)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / f'{owner}.db').resolve()}"

    def persistent_secret(self, name: str) -> str:
        """A secret from the setting of that name or, when unset, generated once and kept in the
        data dir (so every process of a deployment on this host shares it)."""
        value = getattr(self, name, None)
        if value:
            return str(value)
        path = self.data_dir / name
        if path.exists():
            return path.read_text().strip()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        value = secrets.token_urlsafe(48)
        path.touch(mode=0o600)
        path.write_text(value)
        return value


class RedisSettings(CommonSettings):
    """Redis, for the services that keep rate limits, caches or history in it."""

    redis_url: str | None = None
    redis_key_prefix: str = "agentix:"


class ModelEndpointSettings(CommonSettings):
    """The OpenAI-compatible endpoint: the dispatcher seeds its model chain from it; tools_go_equiv
    falls back to it for embeddings, reranking and fact extraction."""

    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str | None = None


class SecretKeySettings(CommonSettings):
    """The key stored secrets are encrypted with: the gateway writes them; the dispatcher reads
    model API keys, tools-go (its MCP bridge) the headers of MCP servers."""

    secret_key: str | None = None


class GatewaySettings(RedisSettings, SecretKeySettings):
    # The dispatchers' built-in model (`AGENTIX_LLM_*`, used while no chain is set) takes images:
    # `/v1` requests with image parts go to it (docs/API.md, "OpenAI-compatible"). The gateway
    # decides, so it is set where the gateway runs.
    llm_vision: bool = False
    # Where `python -m services.gateway` listens (`--host`/`--port` override).
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8080
    gateway_db_url: str | None = None
    # Tasks whose row was written but whose publish failed (NATS down) are re-published this
    # often, once they are at least `task_requeue_min_age_s` old (the message id dedupes).
    task_requeue_interval_s: float = 30.0
    task_requeue_min_age_s: float = 5.0
    # Every task/run SSE stream sends a named `heartbeat` event this often (not in the replay log).
    sse_heartbeat_s: float = Field(default=10.0, gt=0)
    # The recorder writes the task records in one transaction per batch of events; after a batch
    # that was not full it waits this long before fetching again, so events that trickle in (runs
    # whose model streams for seconds) share transactions. A record may lag its events this much.
    recorder_linger_ms: float = Field(default=50.0, ge=0, le=1000)

    # Inbound webhooks (`/hooks/{id}`): the largest body a call may carry, and calls per minute
    # per hook (beyond: 429).
    hook_body_max_bytes: int = Field(default=1024 * 1024, ge=1)
    hook_rate_limit_per_min: int = Field(default=600, ge=1)
    # Completion callbacks: the hosts a webhook URL may name (empty: any public host; `.example.com`
    # allows its subdomains), whether private and loopback addresses are allowed (SSRF: off), each
    # attempt's timeout, the retry backoff (doubling from first to max) and how long after the
    # task's end the callback is retried before it is given up as failed.
    callback_allow_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    callback_allow_private: bool = False
    callback_timeout_s: float = Field(default=10.0, gt=0)
    callback_retry_first_s: float = Field(default=5.0, gt=0)
    callback_retry_max_s: float = Field(default=3600.0, gt=0)
    callback_max_age_s: float = Field(default=24 * 3600.0, gt=0)

    # Security
    jwt_secret: str | None = None
    jwt_ttl_s: int = 12 * 3600
    auth_disabled: bool = False
    dev_user: str = "dev"
    admin_users: Annotated[list[str], NoDecode] = Field(default_factory=list)
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    rate_limit_per_min: int = 120
    # Extra tier-1 guardrail terms (comma-separated), blocked as whole words on task input.
    guardrail_blocklist: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Who sees and may call high-risk tools (code_exec) over MCP (`/mcp`), where there is no
    # approval step: `admins`, `*` (everyone) and/or user ids, comma-separated; empty = nobody.
    mcp_high_risk_for: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["admins"])
    # `/mcp` against DNS rebinding: the browser origins (besides local ones and `cors_origins`)
    # and the Host names (besides local ones; `name:*` any port, `*` no Host check) it serves.
    mcp_allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    mcp_allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The OAuth authorization servers `/.well-known/oauth-protected-resource` names (RFC 9728).
    mcp_authorization_servers: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("admin_users", "cors_origins", "guardrail_blocklist", "mcp_high_risk_for", "callback_allow_hosts",
                     "mcp_allowed_origins", "mcp_allowed_hosts", "mcp_authorization_servers", mode="before")
    @classmethod
    def _lists(cls, value: object) -> object:
        return _split_list(value)


class DispatcherSettings(RedisSettings, ModelEndpointSettings, SecretKeySettings):
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
    # Runs one dispatcher holds at once. A run mostly waits (on a model's stream, a tool), so
    # this is bounded by memory and by what the model endpoints take, not by CPU: runs waiting on
    # a model must not queue behind each other (docs/PERFORMANCE.md).
    dispatcher_max_runs: int = Field(default=256, ge=1)
    # A model's stream becomes at most one `token` (`thinking.delta`, `tool.input`) event per this
    # interval per model call, each a synced write to the task's log (llm/deltas.py); 0: one
    # event per delta the sink is free to take.
    token_event_interval_ms: float = Field(default=50.0, ge=0, le=1000)

    @field_validator("redact_patterns", mode="before")
    @classmethod
    def _patterns(cls, value: object) -> object:
        return _split_patterns(value)


class ToolsGoSettings(RedisSettings, ModelEndpointSettings, SecretKeySettings):
    """tools_go_equiv: its database, and its knowledge bases, ingestion and history (`AGENTIX_KB_…`)."""

    tools_db_url: str | None = None

    # Chunking (characters; headings always start a new chunk).
    kb_chunk_size: int = Field(default=800, ge=100, le=20_000)
    kb_chunk_overlap: int = Field(default=120, ge=0, le=5_000)
    # Embeddings: the local hashed embedder unless a remote model is named. The remote endpoint is
    # the OpenAI-compatible one of `AGENTIX_LLM_BASE_URL` unless `kb_embed_base_url` overrides it.
    kb_embed_model: str | None = None
    kb_embed_base_url: str | None = None
    kb_embed_api_key: str | None = None
    kb_embed_dim: int = Field(default=384, ge=32, le=4096)
    kb_embed_batch: int = Field(default=32, ge=1, le=2048)
    # Ingestion worker.
    kb_ingest_concurrency: int = Field(default=2, ge=1, le=64)
    kb_parse_timeout_s: float = 120.0
    kb_max_document_bytes: int = 50 * 1024 * 1024
    # Search.
    kb_rrf_k: int = 60
    # Facts from a language model at ingest (else the deterministic extractor).
    kb_facts_model: str | None = None
    kb_facts_base_url: str | None = None
    kb_facts_api_key: str | None = None
    # Optional reranking of hybrid candidates (a `/rerank` endpoint; see kb/rerank.py).
    kb_rerank_model: str | None = None
    kb_rerank_base_url: str | None = None
    kb_rerank_api_key: str | None = None
    kb_rerank_depth: int = Field(default=30, ge=1, le=200, description="fused candidates sent to the reranker")
    kb_vector_cache_rows: int = Field(default=2_000_000, ge=1_000, description="vectors kept in memory per replica")
    kb_max_top_k: int = 50
    # History (Redis lists or the DB fallback).
    kb_history_max: int = Field(default=200, ge=1)
    kb_history_ttl_s: int = 30 * 24 * 3600
    # Public base path of the gateway's API, for links in tool results.
    kb_api_base: str = "/api/v1"


class ToolsPySettings(CommonSettings):
    """tools_py: the sandbox of `code_exec` (`AGENTIX_SANDBOX_…`)."""

    sandbox_concurrency: int = Field(default=4, ge=1)  # programs running at once (more wait their turn)
    sandbox_max_timeout_s: float = 60.0
    sandbox_max_memory_mb: int = 1024
    sandbox_max_output: int = 64 * 1024
    # Where throw-away working directories are made (default: the system temp dir).
    sandbox_base_dir: Path | None = None


class Settings(GatewaySettings, DispatcherSettings, ToolsGoSettings, ToolsPySettings):
    """Every setting of every service (the `agentix` command and tests configure several
    services at once); accepted wherever one service's settings are."""
