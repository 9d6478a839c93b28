"""Typed settings: each service loads only what it uses, `Settings` is every service's at once,
and one environment variable means the same thing in every class that reads it."""

from __future__ import annotations

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
    assert set(ToolsPySettings.model_fields) == set(CommonSettings.model_fields)


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
