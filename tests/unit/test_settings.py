"""Typed settings: each service loads only what it uses, `Settings` is every service's at once,
and one environment variable means the same thing in every class that reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shared.settings import (
    CommonSettings,
    DispatcherSettings,
    GatewaySettings,
    Settings,
    ToolsGoSettings,
    ToolsPySettings,
)

SERVICE_CLASSES = (GatewaySettings, DispatcherSettings, ToolsGoSettings, ToolsPySettings)
ROOT = Path(__file__).resolve().parents[2]
# The knobs tools_go_equiv and tools_py once read from settings classes of their own, each still
# read from its variable: `AGENTIX_KB_<NAME>`, `AGENTIX_SANDBOX_<NAME>`.
KB_KNOBS = ("chunk_size", "chunk_overlap", "embed_model", "embed_base_url", "embed_api_key", "embed_dim",
            "embed_batch", "ingest_concurrency", "parse_timeout_s", "max_document_bytes", "rrf_k", "facts_model",
            "facts_base_url", "facts_api_key", "rerank_model", "rerank_base_url", "rerank_api_key", "rerank_depth",
            "vector_cache_rows", "max_top_k", "history_max", "history_ttl_s", "api_base")
SANDBOX_KNOBS = ("concurrency", "max_timeout_s", "max_memory_mb", "max_output", "base_dir")


def test_settings_is_every_service_settings() -> None:
    for cls in SERVICE_CLASSES:
        assert issubclass(Settings, cls) and issubclass(cls, CommonSettings)
    every = set().union(*(cls.model_fields for cls in SERVICE_CLASSES))
    assert set(Settings.model_fields) == every


def test_each_service_has_only_its_own() -> None:
    assert "jwt_secret" in GatewaySettings.model_fields and "jwt_secret" not in DispatcherSettings.model_fields
    assert "redact_patterns" in DispatcherSettings.model_fields
    assert "redact_patterns" not in GatewaySettings.model_fields
    assert "tools_db_url" in ToolsGoSettings.model_fields and "gateway_db_url" not in ToolsGoSettings.model_fields
    assert {f for f in ToolsGoSettings.model_fields if f.startswith("kb_")} == {f"kb_{name}" for name in KB_KNOBS}
    assert set(ToolsPySettings.model_fields) - set(CommonSettings.model_fields) == {
        f"sandbox_{name}" for name in SANDBOX_KNOBS}
    assert not any(f.startswith(("kb_", "sandbox_")) for f in (*GatewaySettings.model_fields,
                                                               *DispatcherSettings.model_fields))


def test_one_variable_one_meaning(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTIX_NATS_SERVERS", "nats://a:1, nats://b:2")
    monkeypatch.setenv("AGENTIX_REDIS_URL", "redis://r:6379/1")
    monkeypatch.setenv("AGENTIX_REDACT_PATTERNS", r"sk-[a-z]{16,},PIN:\d{4}")
    monkeypatch.setenv("AGENTIX_ADMIN_USERS", "ann,bob")
    monkeypatch.setenv("AGENTIX_DATA_DIR", str(tmp_path))
    everything = Settings()
    for cls in SERVICE_CLASSES:
        loaded = cls()
        assert loaded.model_dump() == {k: v for k, v in everything.model_dump().items() if k in cls.model_fields}
    assert DispatcherSettings().redact_patterns == ["sk-[a-z]{16,}", r"PIN:\d{4}"]
    assert GatewaySettings().admin_users == ["ann", "bob"]
    assert ToolsPySettings().nats_servers == ["nats://a:1", "nats://b:2"]


def test_databases_and_secrets_come_from_the_services_own_settings(tmp_path: Path) -> None:
    gateway = GatewaySettings(data_dir=tmp_path, gateway_db_url="postgresql://db/gw", jwt_secret="s3cret")
    assert gateway.db_url("gateway") == "postgresql://db/gw"
    assert gateway.persistent_secret("jwt_secret") == "s3cret"
    tools = ToolsGoSettings(data_dir=tmp_path)
    assert tools.db_url("tools") == f"sqlite:///{(tmp_path / 'tools.db').resolve()}"
    # A secret nobody set is generated once and shared by every class reading the data dir.
    generated = DispatcherSettings(data_dir=tmp_path).persistent_secret("secret_key")
    assert GatewaySettings(data_dir=tmp_path).persistent_secret("secret_key") == generated


def test_the_tool_services_knobs_keep_their_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTIX_KB_CHUNK_SIZE", "300")
    monkeypatch.setenv("AGENTIX_KB_EMBED_MODEL", "text-embedding-3-small")
    monkeypatch.setenv("AGENTIX_KB_HISTORY_MAX", "7")
    monkeypatch.setenv("AGENTIX_SANDBOX_CONCURRENCY", "2")
    monkeypatch.setenv("AGENTIX_SANDBOX_BASE_DIR", str(tmp_path))
    tools_go, tools_py = ToolsGoSettings(), ToolsPySettings()
    assert (tools_go.kb_chunk_size, tools_go.kb_embed_model, tools_go.kb_history_max) == (
        300, "text-embedding-3-small", 7)
    assert (tools_py.sandbox_concurrency, tools_py.sandbox_base_dir) == (2, tmp_path)
    assert Settings().kb_chunk_size == 300 and Settings().sandbox_concurrency == 2
    monkeypatch.setenv("AGENTIX_SANDBOX_CONCURRENCY", "0")  # no program could ever run
    with pytest.raises(ValueError, match="sandbox_concurrency"):
        ToolsPySettings()


def test_no_settings_are_read_when_a_service_is_imported() -> None:
    """A bad variable fails the service's start, where it is reported, not an import (a test, a
    tool listing the modules): each service builds its settings when it starts and passes them down."""
    env = {"AGENTIX_SANDBOX_CONCURRENCY": "many", "AGENTIX_KB_CHUNK_SIZE": "huge", "PATH": "/usr/bin:/bin"}
    code = "import services.tools_py.main, services.tools_py.tools, services.tools_go_equiv.main"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
