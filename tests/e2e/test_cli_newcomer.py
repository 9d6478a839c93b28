"""A newcomer's first hour at the terminal, each step through the real `agentix` command: every
example runs without giving it input, an approval is answered from the CLI (or inline on a
terminal), a user is added without a terminal, and a service takes its own options."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import httpx
import pytest

from shared.natsd import free_port
from tests.e2e.conftest import RunningSuite
from tests.e2e.test_cli import EXAMPLES, agentix

pytestmark = pytest.mark.e2e


def _final_output(stdout: str) -> object:
    return json.loads(stdout[stdout.rindex("\n{"):])


@pytest.mark.parametrize("example", ["hello.json", "branch_fanout.json", "map_summaries.json"])
def test_every_example_runs_on_its_sample_input(running_suite: RunningSuite, example: str) -> None:
    out = agentix(running_suite, "run", str(EXAMPLES / example), "--url", running_suite.url,
                  "--token", running_suite.token())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "input (the workflow's example" in out.stdout and "● done" in out.stdout
    final = _final_output(out.stdout)
    assert isinstance(final, dict) and final
    if example == "map_summaries.json":
        summaries = final["out"]
        assert isinstance(summaries, list) and len(summaries) == 3  # JSON, not JSON inside a string
        assert all(item["ok"] and item["value"] for item in summaries)


def test_parallel_agents_print_whole_lines(running_suite: RunningSuite) -> None:
    out = agentix(running_suite, "run", str(EXAMPLES / "branch_fanout.json"), "--url", running_suite.url,
                  "--token", running_suite.token())
    assert out.returncode == 0, out.stderr
    streamed = [line for line in out.stdout.splitlines() if line.startswith("  [")]
    for node in ("facts", "risks", "merge"):
        text = "\n".join(line.removeprefix(f"  [{node}] ") for line in streamed if line.startswith(f"  [{node}] "))
        assert text.strip(), f"{node} streamed nothing"
    # Each node's lines, joined, are that node's own text: nothing of the other speaker inside.
    merged = _final_output(out.stdout)["out"]  # type: ignore[index]
    merge_text = "\n".join(line.removeprefix("  [merge] ") for line in streamed if line.startswith("  [merge] "))
    assert merge_text == merged


def _start_approval_run(suite: RunningSuite, *, stdin: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentix", "run", str(EXAMPLES / "approval.json"), "--url", suite.url,
         "--token", suite.token()],
        env=suite.env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _task_waiting(proc: subprocess.Popen[str]) -> tuple[str, list[str]]:
    """Read the run's lines up to its hint `approve with: agentix approve TASK …`."""
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if "approve with: agentix approve " in line:
            return line.split("agentix approve ", 1)[1].split()[0], seen
    raise AssertionError("the run ended without waiting for approval:\n" + "".join(seen))


@pytest.mark.parametrize("reject", [False, True])
def test_approve_or_reject_from_the_cli(running_suite: RunningSuite, reject: bool) -> None:
    proc = _start_approval_run(running_suite, stdin=subprocess.DEVNULL)
    try:
        task_id, _ = _task_waiting(proc)
        args = ["approve", task_id, "--comment", "looks right", "--url", running_suite.url,
                "--token", running_suite.token()]
        decided = agentix(running_suite, *args, *(["--reject"] if reject else []))
        assert decided.returncode == 0, decided.stderr
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    if reject:
        assert proc.returncode == 1 and "task ended rejected" in err
    else:
        assert proc.returncode == 0, err
        assert '"decision": "approve"' in rest and "looks right" in rest and "● done" in rest
    again = agentix(running_suite, "approve", task_id, "--url", running_suite.url, "--token", running_suite.token())
    assert again.returncode == 1 and "Conflict" in again.stderr  # the task no longer waits


def test_run_asks_inline_on_a_terminal(running_suite: RunningSuite) -> None:
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"y\n")  # typed ahead: read when the question comes
        proc = _start_approval_run(running_suite, stdin=follower)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 0, out + err
    assert "approve review? [y/n]" in out and '"decision": "approve"' in out and "● done" in out


def test_user_add_without_a_terminal(running_suite: RunningSuite) -> None:
    no_tty = subprocess.run([sys.executable, "-m", "agentix", "user", "add", "carol"], env=running_suite.env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
    assert no_tty.returncode == 2 and "Traceback" not in no_tty.stderr
    assert "--password-stdin" in no_tty.stderr

    piped = subprocess.run([sys.executable, "-m", "agentix", "user", "add", "carol", "--password-stdin"],
                           env=running_suite.env, input="carol-secret-1\n", capture_output=True, text=True,
                           timeout=120, check=False)
    assert piped.returncode == 0, piped.stderr
    assert "alembic.runtime.plugins" not in piped.stdout + piped.stderr
    assert "Context impl" not in piped.stderr and "Will assume" not in piped.stderr
    login = httpx.post(f"{running_suite.url}/api/v1/auth/login",
                       json={"username": "carol", "password": "carol-secret-1"}, timeout=10)
    assert login.status_code == 200, login.text


def test_migrate_is_quiet_about_alembic_plugins(running_suite: RunningSuite) -> None:
    out = agentix(running_suite, "migrate")
    assert out.returncode == 0, out.stderr
    assert "gateway database at revision" in out.stdout
    assert "alembic.runtime.plugins" not in out.stdout + out.stderr
    assert "Context impl" not in out.stderr and "Will assume" not in out.stderr  # alembic's per-connection narration


def test_a_service_takes_its_own_options(running_suite: RunningSuite) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentix", "gateway", "--port", str(port)], env=running_suite.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # uvicorn says where it listens once it does
            assert "unrecognized arguments" not in line
            if f"127.0.0.1:{port}" in line:
                break
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_user_add_reports_bad_names_plainly(running_suite: RunningSuite) -> None:
    out = subprocess.run([sys.executable, "-m", "agentix", "user", "add", "no spaces", "--password-stdin"],
                         env=running_suite.env, input="long-enough-1\n", capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 2 and out.stderr.startswith("error: user names")
