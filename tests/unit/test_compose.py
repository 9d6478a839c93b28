"""deploy/compose.yml is checked statically (no Docker engine here): it parses, every service has
a healthcheck, the Agentix services get the env they need and wait for healthy dependencies."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose.yml"
AGENTIX = {"gateway", "dispatcher", "tools-go", "tools-py"}
NEEDED_ENV = {"AGENTIX_NATS_SERVERS", "AGENTIX_JS_REPLICAS", "AGENTIX_GATEWAY_DB_URL", "AGENTIX_TOOLS_DB_URL",
              "AGENTIX_REDIS_URL", "AGENTIX_JWT_SECRET", "AGENTIX_SECRET_KEY"}


def load() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_parses_with_every_service_healthchecked() -> None:
    services = load()["services"]
    assert AGENTIX <= set(services)
    assert {"postgres", "redis", "nats-1", "nats-2", "nats-3"} <= set(services)
    for name, svc in services.items():
        assert "healthcheck" in svc, f"{name} has no healthcheck"
        assert svc["healthcheck"]["test"], name


def test_agentix_services_have_env_and_wait_for_healthy_dependencies() -> None:
    services = load()["services"]
    for name in AGENTIX:
        svc = services[name]
        assert NEEDED_ENV <= set(svc["environment"]), name
        deps = svc["depends_on"]
        for dep in ("postgres", "redis", "nats-1", "nats-2", "nats-3"):
            assert deps[dep]["condition"] == "service_healthy", (name, dep)
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert svc["command"][0] == "agentix"


def test_nats_cluster_has_jetstream_and_three_replicas() -> None:
    doc = load()
    for i in (1, 2, 3):
        cmd = doc["services"][f"nats-{i}"]["command"]
        assert "-js" in cmd and "--routes" in cmd
    assert doc["services"]["dispatcher"]["environment"]["AGENTIX_JS_REPLICAS"] == "3"
