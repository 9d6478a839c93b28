"""The NATS side of `agentix up`: one embedded server, or with `--cluster N` the production
topology of deploy/compose.yml on one machine (N routed nodes, JetStream replicas 3), as
children of the supervisor."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from agentix.probe import get_json
from agentix.supervisor import ChildSpec
from shared.natsd import NatsNode, free_ports, port_is_free

NATS_TIER = 0  # stopped last: the services drain through it
MAX_REPLICAS = 3  # as in production; JetStream allows up to 5


def single_node(data_dir: Path) -> list[NatsNode]:
    """The embedded server, on the default NATS port when it is free so other tools find it."""
    port = 4222 if port_is_free(4222) else free_ports(1)[0]
    return [NatsNode("nats", data_dir / "nats", port, free_ports(1)[0])]


def cluster_nodes(data_dir: Path, size: int) -> list[NatsNode]:
    """`size` nodes routed to each other, each with its own store under `<data dir>/nats-cluster`."""
    ports = free_ports(3 * size)
    client, monitor, cluster = ports[:size], ports[size:2 * size], ports[2 * size:]
    return [
        NatsNode(f"nats-{i + 1}", data_dir / "nats-cluster" / f"nats-{i + 1}", client[i], monitor[i],
                 cluster_port=cluster[i], routes=[p for j, p in enumerate(cluster) if j != i], sync_always=False)
        for i in range(size)
    ]


def node_specs(nodes: list[NatsNode], data_dir: Path, env: dict[str, str]) -> list[ChildSpec]:
    def log_file(node: NatsNode) -> Path:
        # The lone server keeps the log name it always had.
        return data_dir / "nats-server.log" if len(nodes) == 1 else node.store_dir.parent / f"{node.name}.log"

    return [ChildSpec(node.name, node.command(), env, tier=NATS_TIER, log_file=log_file(node), kind="nats")
            for node in nodes]


def services_env(nodes: list[NatsNode]) -> dict[str, str]:
    """What the services need to use these nodes: all of them, and replicas across a cluster."""
    env = {"AGENTIX_NATS_SERVERS": ",".join(node.url for node in nodes)}
    if len(nodes) > 1:
        env["AGENTIX_JS_REPLICAS"] = str(min(len(nodes), MAX_REPLICAS))
    return env


def wait_healthy(nodes: list[NatsNode], timeout_s: float = 30.0, given_up: Callable[[], bool] = lambda: False) -> bool:
    """Until every node's `/healthz` answers 200 (False after `timeout_s`, or once `given_up`):
    for a cluster that means each node has joined the meta group and is current, so the services
    can create their replicated streams."""
    deadline = time.monotonic() + timeout_s
    pending = list(nodes)
    while pending and time.monotonic() < deadline and not given_up():
        node = pending[0]
        if get_json(node.healthz_url) is not None:
            pending.pop(0)
            continue
        time.sleep(0.1)
    return not pending
