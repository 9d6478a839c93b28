"""`agentix up` supervises: a killed service or NATS node comes back and tasks still run, a
crash-looping service stops `up` with a message naming it, and `--cluster 3` runs the
production NATS topology on one machine and survives losing a node."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.agentix_up import UpProcess, agentix_up, supervision_rows
from tests.support.until import until

pytestmark = pytest.mark.e2e


def test_a_killed_dispatcher_and_nats_come_back_and_tasks_still_run(tmp_path: Path) -> None:
    with agentix_up(tmp_path / "data") as up:
        nats_pid = up.kill("nats")
        up.wait_restarted("nats", nats_pid)
        dispatcher_pid = up.kill("dispatcher")
        restarted = up.wait_restarted("dispatcher", dispatcher_pid)
        assert restarted["last_exit"] == "signal SIGKILL"
        until(lambda: "dispatcher exited with signal SIGKILL" in up.output, 10, "the restart to be logged")

        assert up.run_hello()["out"]
        status = up.agentix("status")
        assert status.returncode == 0, status.stdout + status.stderr
        rows = supervision_rows(status.stdout)
        assert (rows["dispatcher"]["PID"], rows["dispatcher"]["STATE"], rows["dispatcher"]["RESTARTS"]) == (
            str(restarted["pid"]), "running", "1")
        assert rows["dispatcher"]["LAST_EXIT"].startswith("signal SIGKILL")
        assert rows["nats"]["RESTARTS"] == "1" and rows["gateway"]["RESTARTS"] == "0"


def test_a_crash_looping_service_stops_up_naming_it_and_its_last_lines(tmp_path: Path) -> None:
    # An operator's typo, not a test hook: tools-py refuses a sandbox setting that is not a number.
    up = UpProcess(tmp_path / "data", extra_env={"AGENTIX_SANDBOX_CONCURRENCY": "many"})
    code = up.wait_exit(90)
    assert code == 1, up.output[-3000:]
    assert "tools-py is crash-looping: 5 exits within 60 s, the last with exit code 1" in up.output, up.output[-6000:]
    last = up.output[up.output.index("last output of tools-py:"):]
    assert "validation error for ToolsPySettings" in last and "Input should be a valid integer" in last
    state = up.process("tools-py")
    assert state is not None and (state["state"], state["restarts"]) == ("crash-loop", 4)
    assert {p["state"] for p in up.processes() if p["name"] != "tools-py"} == {"stopped"}


def test_cluster_of_three_runs_tasks_and_survives_a_killed_nats_node(tmp_path: Path) -> None:
    # A task submitted while the killed node's streams elect a new leader is refused by JetStream;
    # the gateway keeps it and re-publishes it on its requeue interval, shortened here from 30 s.
    requeue = {"AGENTIX_TASK_REQUEUE_INTERVAL_S": "1", "AGENTIX_TASK_REQUEUE_MIN_AGE_S": "1"}
    with agentix_up(tmp_path / "data", ["--cluster", "3"], requeue) as up:
        assert "NATS cluster of 3 nodes with JetStream (replicas 3)" in up.output
        for node in ("nats-1", "nats-2", "nats-3"):
            assert (tmp_path / "data" / "nats-cluster" / node / "js").is_dir()
        assert up.run_hello()["out"]

        pid = up.kill("nats-2")
        up.wait_restarted("nats-2", pid)
        assert up.proc.poll() is None
        assert up.run_hello()["out"]
