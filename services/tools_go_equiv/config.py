"""tools_go_equiv's own knobs (env prefix `AGENTIX_KB_`); what it shares with other services is
`shared.settings.ToolsGoSettings`."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class KbSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENTIX_KB_", extra="ignore")

    # Chunking (characters; headings always start a new chunk).
    chunk_size: int = Field(default=800, ge=100, le=20_000)
    chunk_overlap: int = Field(default=120, ge=0, le=5_000)
    # Embeddings: the local hashed embedder unless a remote model is named. The remote endpoint is
    # the OpenAI-compatible one of `AGENTIX_LLM_BASE_URL` unless `embed_base_url` overrides it.
    embed_model: str | None = None
    embed_base_url: str | None = None
    embed_api_key: str | None = None
    embed_dim: int = Field(default=384, ge=32, le=4096)
    embed_batch: int = Field(default=32, ge=1, le=2048)
    # Ingestion worker.
    ingest_concurrency: int = Field(default=2, ge=1, le=64)
    parse_timeout_s: float = 120.0
    max_document_bytes: int = 50 * 1024 * 1024
    # Search.
    rrf_k: int = 60
    # Facts from a language model at ingest (else the deterministic extractor).
    facts_model: str | None = None
    facts_base_url: str | None = None
    facts_api_key: str | None = None
    # Optional reranking of hybrid candidates (a `/rerank` endpoint; see kb/rerank.py).
    rerank_model: str | None = None
    rerank_base_url: str | None = None
    rerank_api_key: str | None = None
    rerank_depth: int = Field(default=30, ge=1, le=200, description="fused candidates sent to the reranker")
    vector_cache_rows: int = Field(default=2_000_000, ge=1_000, description="vectors kept in memory per replica")
    max_top_k: int = 50
    # History (Redis lists or the DB fallback).
    history_max: int = Field(default=200, ge=1)
    history_ttl_s: int = 30 * 24 * 3600
    # Public base path of the gateway's API, for links in tool results.
    api_base: str = "/api/v1"
