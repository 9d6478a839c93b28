"""The supervisor of `agentix up` with real (tiny) processes and real signals: restarts with
backoff, the crash loop, the state file, and the stop in tiers (SIGTERM, SIGKILL after a deadline)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

from agentix.supervision_state import read_state
from agentix.supervisor import ChildSpec, RestartPolicy, Supervisor
from tests.support.until import until

FAST = RestartPolicy(first_delay_s=0.01, max_delay_s=0.04, stable_after_s=60, crash_loop_exits=4)


def python(code: str, name: str = "child", tier: int = 1, **env: str) -> ChildSpec:
    return ChildSpec(name, [sys.executable, "-c", textwrap.dedent(code)], {**os.environ, **env}, tier=tier,
                     log_file=None)


def state(data_dir: Path, name: str) -> dict:
    return next(p for p in (read_state(data_dir) or {})["processes"] if p["name"] == name)


def test_backoff_doubles_then_a_crash_loop_names_the_child_and_keeps_its_last_lines(tmp_path: Path) -> None:
    said: list[str] = []
    sup = Supervisor(FAST, state_file=tmp_path / "supervisor.json", say=said.append)
    sup.start(python("print('bad config: nope', flush=True); raise SystemExit(3)", name="flaky"))
    assert sup.failed.wait(30)
    try:
        assert sup.failure == "flaky is crash-looping: 4 exits within 60 s, the last with exit code 3"
        assert sup.failed_child == "flaky" and "bad config: nope" in sup.last_lines("flaky")
        delays = [line.split("restarting in ")[1].split(" s")[0] for line in said]
        assert delays == ["0.01", "0.02", "0.04"]
        flaky = state(tmp_path, "flaky")
        assert (flaky["state"], flaky["restarts"], flaky["last_exit"], flaky["pid"]) == ("crash-loop", 3, "exit code 3",
                                                                                          None)
    finally:
        sup.stop()
    assert state(tmp_path, "flaky")["state"] == "crash-loop"  # the stop keeps why it ended


def test_backoff_starts_over_for_a_process_that_stayed_up(tmp_path: Path) -> None:
    said: list[str] = []
    steady = RestartPolicy(first_delay_s=0.01, stable_after_s=0, crash_loop_exits=3)
    sup = Supervisor(steady, say=said.append)
    sup.start(python("raise SystemExit(1)"))
    assert sup.failed.wait(30)
    sup.stop()
    assert [line.split("restarting in ")[1].split(" s")[0] for line in said] == ["0.01", "0.01"]


def test_a_killed_child_is_restarted_and_the_state_file_says_so(tmp_path: Path) -> None:
    sup = Supervisor(FAST, state_file=tmp_path / "supervisor.json", say=lambda _: None)
    first = sup.start(python("import time; print('serving', flush=True); time.sleep(60)", name="svc"))
    try:
        os.kill(first.pid, signal.SIGKILL)
        svc = until(lambda: (s := state(tmp_path, "svc"))["restarts"] == 1 and s["pid"] and s, 15, "a restart")
        assert svc["pid"] != first.pid and svc["state"] == "running" and svc["last_exit"] == "signal SIGKILL"
        assert not sup.failed.is_set()
    finally:
        sup.stop()
    assert state(tmp_path, "svc")["state"] == "stopped"


def test_without_restarts_the_first_exit_is_the_failure() -> None:
    sup = Supervisor(FAST, restart=False, say=lambda _: None)
    sup.start(python("raise SystemExit(7)", name="once"))
    assert sup.failed.wait(15)
    sup.stop()
    assert sup.failure == "once exited with exit code 7"


def test_stop_drains_the_higher_tier_first_and_kills_what_ignores_sigterm() -> None:
    said: list[str] = []
    sup = Supervisor(FAST, say=said.append)
    stubborn = sup.start(python("""
        import signal, time
        signal.signal(signal.SIGTERM, lambda *_: print('draining', flush=True))
        print('ready', flush=True)
        time.sleep(60)
    """, name="service", tier=1))
    sup.start(python("""
        import os, signal, sys, time
        def on_term(*_):
            try:
                os.kill(int(os.environ['PEER']), 0)
                print('peer still alive', flush=True)
            except ProcessLookupError:
                print('peer gone', flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        print('ready', flush=True)
        time.sleep(60)
    """, name="nats", tier=0, PEER=str(stubborn.pid)))
    until(lambda: "ready" in sup.last_lines("service") and "ready" in sup.last_lines("nats"), 15, "both children")
    sup.stop(default_deadline_s=0.5)
    assert stubborn.returncode == -signal.SIGKILL and "service did not stop in time; killing it" in said
    until(lambda: "draining" in sup.last_lines("service"), 5, "SIGTERM before SIGKILL")
    until(lambda: "peer gone" in sup.last_lines("nats"), 5, "the lower tier's output")
