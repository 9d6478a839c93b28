"""Idle memory of the embedded suite as a user sees it: starts `agentix up` with a temporary data
dir on a free port, waits until it is ready, lets it settle, then prints each process's resident
set size (VmRSS from /proc, Linux) and the total against the targets, and stops the suite.
Targets: the `agentix up` supervisor itself ≤ 30 MB, and the whole suite (the supervisor, the
NATS server, gateway, dispatcher, tools-go and tools-py) ≤ 300 MB. Run:
    python -m bench.memory [--settle 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from shared.natsd import free_ports

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = 300.0
SUPERVISOR_TARGET_MB = 30.0
SUPERVISOR = "agentix up"
NAMES = {  # a command-line fragment → the process it marks (the supervisor is the one started here)
    "services.gateway": "gateway",
    "services.dispatcher": "dispatcher",
    "services.tools_go_equiv": "tools-go",
    "services.tools_py": "tools-py",
    "nats-server": "nats-server",
}


def children(pid: int) -> list[int]:
    """Every descendant of `pid` (Linux /proc)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = Path(f"/proc/{parent}/task").iterdir()
            found = [int(c) for t in tasks for c in (t / "children").read_text().split()]
        except OSError:
            continue
        out += found
        todo += found
    return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def name_of(pid: int) -> str | None:
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return next((name for fragment, name in NAMES.items() if fragment in cmdline), None)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agentix up exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the suite did not become ready")


def measure(settle_s: float) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="agentix-bench-memory-"))
    port = free_ports(1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")} | {"PYTHONPATH": str(ROOT)}
    with (work / "up.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentix", "up", "--data-dir", str(work / "data"), "--port", str(port)],
            env=env, stdout=log, stderr=log, cwd=ROOT,
        )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        time.sleep(settle_s)  # idle: let start-up work (first heartbeats, registry) finish
        out: dict[str, float] = {SUPERVISOR: rss_mb(proc.pid)}
        for pid in children(proc.pid):
            name = name_of(pid)
            if name is not None:
                out[name] = out.get(name, 0.0) + rss_mb(pid)
        return out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle after ready before reading")
    args = parser.parse_args()
    rss = measure(args.settle)
    print("idle memory of the embedded suite (agentix up), VmRSS:")
    for name in [SUPERVISOR, *NAMES.values()]:
        line = f"  {name:<12} {rss.get(name, 0.0):7.1f} MB" + ("" if name in rss else "  (not found)")
        if name == SUPERVISOR:
            line += f"  (target <= {SUPERVISOR_TARGET_MB:.0f} MB: {_verdict(rss[name], SUPERVISOR_TARGET_MB)})"
        print(line)
    total = sum(rss.values())
    print(f"  {'total':<12} {total:7.1f} MB  (target <= {TARGET_MB:.0f} MB: {_verdict(total, TARGET_MB)})")


def _verdict(mb: float, target_mb: float) -> str:
    return "met" if mb <= target_mb else "NOT met"


if __name__ == "__main__":
    main()
