"""What `agentix up` hands nats-server and the services, and how `agentix status` shows the
supervisor's state file (no processes)."""

from __future__ import annotations

import os
from pathlib import Path

from agentix.cluster import cluster_nodes, services_env, single_node
from agentix.status import render_supervision
from agentix.supervision_state import ProcessState, read_state, write_state


def test_a_cluster_routes_each_node_to_the_others_with_its_own_store(tmp_path: Path) -> None:
    nodes = cluster_nodes(tmp_path, 3)
    ports = [p for n in nodes for p in (n.port, n.monitor_port, n.cluster_port)]
    assert len(set(ports)) == 9
    for node in nodes:
        assert node.routes == [n.cluster_port for n in nodes if n is not node]
        assert node.store_dir == tmp_path / "nats-cluster" / node.name
        conf = node.config()
        assert f"server_name: {node.name}" in conf and f"listen: 127.0.0.1:{node.cluster_port}" in conf
        assert "name: agentix" in conf and "sync_interval" not in conf  # replicas, as in compose.yml
    env = services_env(nodes)
    assert env["AGENTIX_NATS_SERVERS"].split(",") == [n.url for n in nodes]
    assert env["AGENTIX_JS_REPLICAS"] == "3"


def test_a_single_node_syncs_every_write_and_leaves_replicas_alone(tmp_path: Path) -> None:
    [node] = single_node(tmp_path)
    assert "sync_interval: always" in node.config() and "cluster" not in node.config()
    assert services_env([node]) == {"AGENTIX_NATS_SERVERS": node.url}


def test_status_shows_restarts_and_whether_up_still_runs(tmp_path: Path) -> None:
    write_state(tmp_path / "supervisor.json", [
        ProcessState("nats", "nats", 101, "running", 0, since=1000.0, last_exit=None, last_exit_at=None),
        ProcessState("dispatcher", "service", 202, "running", 2, since=1090.0, last_exit="signal SIGKILL",
                     last_exit_at=1089.5),
    ])
    doc = read_state(tmp_path)
    assert doc is not None and doc["supervisor_pid"] == os.getpid()
    text = render_supervision(doc, now=1100.0)
    assert text.startswith(f"Supervised by agentix up (pid {os.getpid()})")
    dispatcher = next(line for line in text.splitlines() if line.startswith("  dispatcher"))
    assert dispatcher.split()[:5] == ["dispatcher", "202", "running", "2", "10s"]
    assert "signal SIGKILL (10s ago)" in dispatcher

    doc["supervisor_pid"] = 2**22 + 1  # above Linux's pid_max: never a live process
    assert "no longer running" in render_supervision(doc, now=1100.0)
    assert render_supervision(None) == ""
