"""The terminal side: `agentix run` follows a task to the end and says how it ended by its exit
code; `agentix status` lists every running service."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import RunningSuite

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.e2e


def agentix(suite: RunningSuite, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentix", *args],
        env=suite.env, capture_output=True, text=True, timeout=120, check=False,
    )


def test_run_streams_and_exits_zero_when_done(running_suite: RunningSuite) -> None:
    out = agentix(running_suite, "run", str(EXAMPLES / "hello.json"), "--url", running_suite.url,
                  "--token", running_suite.token(), "--input", json.dumps({"text": "What runs the graph?"}))
    assert out.returncode == 0, out.stderr
    assert "▶ ans (agent)" in out.stdout and "● done" in out.stdout
    final = json.loads(out.stdout[out.stdout.rindex("\n{"):])
    assert final["out"] and final["out"] in out.stdout.replace("  [ans] ", "")


def test_run_exits_nonzero_on_an_invalid_workflow(running_suite: RunningSuite, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": "1", "nodes": [{"id": "a", "kind": "agent", "config": {}}], "edges": []}))
    out = agentix(running_suite, "run", str(bad), "--url", running_suite.url, "--token", running_suite.token())
    assert out.returncode == 1
    assert "input_count" in out.stderr and "bad_config" in out.stderr


def test_run_exits_nonzero_when_the_task_fails(running_suite: RunningSuite, tmp_path: Path) -> None:
    dsl = {"version": "1", "nodes": [
        {"id": "in", "kind": "input", "config": {}},
        {"id": "out", "kind": "output", "config": {"value": "{{ in.text.nope.deeper }}"}}],
        "edges": [{"source": "in", "target": "out"}]}
    path = tmp_path / "breaks.json"
    path.write_text(json.dumps(dsl))
    out = agentix(running_suite, "run", str(path), "--url", running_suite.url, "--token", running_suite.token(),
                  "--input", '{"text": "x"}')
    assert out.returncode == 1 and "task ended failed" in out.stderr
    assert "null" not in out.stdout.splitlines()  # no output to show: none is printed


def test_run_refuses_a_missing_input_field_before_running(running_suite: RunningSuite) -> None:
    out = agentix(running_suite, "run", str(EXAMPLES / "hello.json"), "--url", running_suite.url,
                  "--token", running_suite.token(), "--input", "{}")
    assert out.returncode == 1 and "task " not in out.stdout
    assert "Invalid input" in out.stderr and "'text' is a required property" in out.stderr


def test_status_lists_every_service(running_suite: RunningSuite) -> None:
    out = agentix(running_suite, "status", "--url", running_suite.url, "--token", running_suite.token(admin=True))
    assert out.returncode == 0, out.stdout + out.stderr
    for service in ("gateway", "dispatcher", "tools-go", "tools-py"):
        assert f"\n  {service} " in out.stdout
    assert "kb_search" in out.stdout and "database  True" in out.stdout
