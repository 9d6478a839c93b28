"""The whole suite as real processes: nats-server from the wheel, then gateway, dispatcher,
tools-go and tools-py started exactly as `agentix up` starts them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentix.up import SERVICES, Suite, wait_ready
from shared.auth_tokens import mint_token
from shared.natsd import NatsServer, free_port
from shared.settings import Settings


@dataclass
class RunningSuite:
    url: str
    settings: Settings
    suite: Suite
    nats: NatsServer | None  # None when the suite was started on servers of the caller's (a cluster)
    env: dict[str, str]

    def stop(self) -> None:
        self.suite.stop()
        if self.nats is not None:
            self.nats.cleanup()

    def token(self, user: str = "alice", admin: bool = False) -> str:
        return mint_token(self.settings, user, admin=admin)

    def headers(self, user: str = "alice", admin: bool = False) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(user, admin)}"}


def tail_logs(log_dir: Path, lines: int = 30) -> str:
    """The end of every service's log, for a failure message."""
    parts = []
    for path in sorted(log_dir.glob("*.log")):
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"--- {path.name}\n" + "\n".join(tail))
    return "\n".join(parts)


def start_suite(data_dir: Path, extra_env: dict[str, str] | None = None,
                cluster: list[str] | None = None) -> RunningSuite:
    """The services on an embedded server of their own, or on `cluster`'s servers with JetStream
    replicas across them (3 at most), as `agentix up --cluster` runs them."""
    nats = None if cluster else NatsServer(data_dir / "nats").start()
    servers = cluster if nats is None else [nats.url]
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")},
        "AGENTIX_NATS_SERVERS": ",".join(servers),
        **({"AGENTIX_JS_REPLICAS": str(min(len(cluster), 3))} if cluster else {}),
        "AGENTIX_DATA_DIR": str(data_dir),
        "AGENTIX_SUBJECT_PREFIX": f"e{uuid.uuid4().hex[:8]}",
        "AGENTIX_HEARTBEAT_INTERVAL_S": "1",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    suite = Suite(data_dir, env, log_dir=logs)
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "services.gateway", "migrate"], env=env, check=True)
    for name, module in SERVICES:
        suite.spawn(name, module, ["--port", str(port)] if name == "gateway" else [])
    url = f"http://127.0.0.1:{port}"
    if not wait_ready(url, suite):
        why = suite.dead() or "suite not ready in time"
        suite.stop()
        if nats is not None:
            nats.cleanup()
        raise RuntimeError(f"{why}\n{tail_logs(logs)}")
    settings = Settings(data_dir=data_dir, nats_servers=servers, subject_prefix=env["AGENTIX_SUBJECT_PREFIX"])
    return RunningSuite(url, settings, suite, nats, env)


@pytest.fixture(scope="session")
def running_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSuite]:
    running = start_suite(tmp_path_factory.mktemp("suite"))
    yield running
    running.stop()
