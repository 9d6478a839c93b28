"""The four services started as processes on a 3-node cluster that is still forming: each node
started on a fresh store, and the services let in the moment every node answers
`/healthz?js-enabled-only=true` (what deploy/compose.yml waits for), not once it is healthy.

An interpreter takes seconds to start a service; on this machine the cluster elects its meta
leader and is healthy well within that (0.1–0.6 s after JetStream is enabled), so services
started at that moment would only ever meet a settled cluster. Here the service processes start
first, each pointed at a `Gate` in front of a node's client port (`gate.py`), which holds their
connections until every node answers JetStream-enabled: they reach the cluster at that instant,
as services that started instantly would.

`FormingStart` runs one such start: the gates, the services (all at once), the cluster, the wait
until the gateway's `/ready` is 200 with a heartbeat from every service, and what a check needs
after it — each service's output (a traceback there is a failure even when the service came up),
and the meta leader to SIGKILL while the services start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from agentix.up import SERVICES
from shared.natsd import free_port
from tests.support.cluster import ClusterNode, NatsCluster
from tests.support.gate import Gate

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 180.0  # four interpreters starting on a shared 2-core machine, then the waits


def services_env(data_dir: Path, urls: list[str], prefix: str) -> dict[str, str]:
    """The deployment every service of one start reads: the cluster, replicas 3, INFO logs (the
    waits are logged there), a heartbeat a second so `/ready` sees every service soon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")}
    return env | {
        "AGENTIX_NATS_SERVERS": ",".join(urls),
        "AGENTIX_JS_REPLICAS": "3",
        "AGENTIX_DATA_DIR": str(data_dir),
        "AGENTIX_SUBJECT_PREFIX": prefix,
        "AGENTIX_HEARTBEAT_INTERVAL_S": "1",
        # JetStream reserves max_bytes per stream on every replica: keep test streams small.
        "AGENTIX_EVENTS_MAX_BYTES": str(64 * 1024 * 1024),
        "AGENTIX_LOG_LEVEL": "INFO",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }


def migrate(data_dir: Path) -> None:
    """The gateway's database, once for every start that shares `data_dir` (NATS is what is fresh)."""
    env = services_env(data_dir, ["nats://127.0.0.1:1"], "migrate")
    subprocess.run([sys.executable, "-m", "services.gateway", "migrate"], env=env, check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)


async def js_enabled(node: ClusterNode, timeout_s: float = 60.0) -> None:
    """Until the node's monitoring port says JetStream is enabled (not that the node is current)."""
    url = f"{node.spec.healthz_url}?js-enabled-only=true"
    async with httpx.AsyncClient(timeout=1) as client, asyncio.timeout(timeout_s):
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.02)


class FormingStart:
    def __init__(self, root: Path, data_dir: Path) -> None:
        self.cluster = NatsCluster(root=root / "cluster")
        self.gates = [Gate(node.spec.port) for node in self.cluster.nodes]
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = services_env(data_dir, [gate.url for gate in self.gates], f"f{uuid.uuid4().hex[:8]}")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    async def start(self) -> None:
        """The services, held at the gates; then the cluster; the gates open once every node
        answers JetStream-enabled."""
        for gate in self.gates:
            await gate.start()
        self.start_services()
        await self._all_at_the_gates()
        for node in self.cluster.nodes:
            node.start()
        await asyncio.gather(*(js_enabled(node) for node in self.cluster.nodes))
        for gate in self.gates:
            gate.open()

    def start_services(self) -> None:
        """The four services, each its own process, all at once (as `agentix up` starts them)."""
        for name, module in SERVICES:
            args = ["--port", str(self.port)] if name == "gateway" else []
            with (self.logs / f"{name}.log").open("ab") as out:
                self.procs[name] = subprocess.Popen([sys.executable, "-m", module, *args], env=self.env, cwd=ROOT,
                                                    stdout=out, stderr=subprocess.STDOUT)

    async def _all_at_the_gates(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until a connection of every service waits at a gate (each has one at a time)."""
        async with asyncio.timeout(timeout_s):
            while sum(gate.held for gate in self.gates) < len(self.procs):
                self._none_exited()
                await asyncio.sleep(0.01)

    def _none_exited(self) -> None:
        exited = {name: p.returncode for name, p in self.procs.items() if p.poll() is not None}
        if exited:
            raise AssertionError(f"services exited while starting: {exited}\n{self.output_tails()}")

    async def ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """Until `/ready` is 200 and names every service (a heartbeat from each): its body. A
        service that exits meanwhile fails at once, with its output."""
        wanted = {name for name, _ in SERVICES if name != "gateway"}
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as client, asyncio.timeout(timeout_s):
            while True:
                self._none_exited()
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    resp = await client.get("/ready")
                    if resp.status_code == 200 and wanted <= set(resp.json().get("services", {})):
                        return dict(resp.json())
                await asyncio.sleep(0.1)

    def output(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def waits(self) -> dict[str, int]:
        """How many waits each service has logged (a line per attempt: `… trying again in …`)."""
        return {name: self.output(name).count("; trying again in ") for name in self.procs}

    def tracebacks(self) -> dict[str, str]:
        """Each service whose output holds a traceback, with that output."""
        return {name: self.output(name) for name in self.procs if "Traceback" in self.output(name)}

    def output_tails(self, lines: int = 40) -> str:
        return "\n".join(f"--- {name}\n" + "\n".join(self.output(name).splitlines()[-lines:]) for name in self.procs)

    def meta_leader(self) -> ClusterNode | None:
        """The node leading the JetStream meta group, if one is elected (from any node's `/jsz`)."""
        for node in self.cluster.nodes:
            if not node.running:
                continue
            with contextlib.suppress(httpx.HTTPError, ValueError):
                meta = httpx.get(f"http://127.0.0.1:{node.spec.monitor_port}/jsz", timeout=1).json()
                leader = (meta.get("meta_cluster") or {}).get("leader")
                if leader:
                    return self.cluster.node(leader)
        return None

    async def stop(self) -> None:
        """SIGKILL everything: the next start has a fresh store and port, nothing to hand over."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait()
        for gate in self.gates:
            await gate.close()
        self.cluster.cleanup()
