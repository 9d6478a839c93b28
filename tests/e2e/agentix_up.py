"""`agentix up` as a real process for end-to-end tests: its output read continuously (so a full
pipe never blocks it), its supervision state file, and the CLI run against it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentix.supervision_state import read_state
from shared.natsd import free_port
from tests.support.until import until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class UpProcess:
    def __init__(self, data_dir: Path, args: list[str] = (), extra_env: dict[str, str] | None = None,
                 python_flags: list[str] = ()) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")}
        self.env = env | {"AGENTIX_SUBJECT_PREFIX": f"u{uuid.uuid4().hex[:8]}", "AGENTIX_HEARTBEAT_INTERVAL_S": "1",
                          "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, *python_flags, "-m", "agentix", "up",
             "--data-dir", str(data_dir), "--port", str(self.port), *args],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_banner(self, timeout_s: float = 60.0) -> None:
        def banner() -> bool:
            if self.proc.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"agentix up ended before its banner:\n{self.output}")
            return any(line.startswith("Press Ctrl-C to stop.") for line in self.lines)

        until(banner, timeout_s, "the banner of agentix up")

    def processes(self) -> list[dict[str, Any]]:
        return (read_state(self.data_dir) or {}).get("processes", [])

    def process(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.processes() if p["name"] == name), None)

    def kill(self, name: str) -> int:
        """SIGKILL the supervised process `name`; its pid."""
        pid = until(lambda: (self.process(name) or {}).get("pid"), 10, f"{name} to run")
        os.kill(pid, signal.SIGKILL)
        return pid

    def wait_restarted(self, name: str, old_pid: int, timeout_s: float = 30.0) -> dict[str, Any]:
        def restarted() -> dict[str, Any] | None:
            p = self.process(name)
            back = p and p["restarts"] >= 1 and p["state"] == "running" and p["pid"] not in (None, old_pid)
            return p if back else None

        return until(restarted, timeout_s, f"{name} to be restarted")

    def agentix(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentix", *args, "--url", self.url, "--data-dir", str(self.data_dir)],
            env=self.env, capture_output=True, text=True, timeout=60, check=False,
        )

    def run_hello(self) -> dict[str, Any]:
        out = self.agentix("run", str(EXAMPLES / "hello.json"), "--quiet")
        assert out.returncode == 0, out.stdout + out.stderr + self.output[-3000:]
        return json.loads(out.stdout)

    def wait_exit(self, timeout_s: float) -> int:
        """Until `up` ends by itself; its exit code, with all its output read."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.interrupt()
            raise
        self._reader.join(5)
        return code

    def interrupt(self, timeout_s: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self._reader.join(5)
        return code


def supervision_rows(status_text: str) -> dict[str, dict[str, str]]:
    """The table `agentix status` prints under "Supervised by …", by process name."""
    lines = status_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Supervised by"))
    header = lines[start + 1].split()
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("  "):
            break
        cells = line.split(None, len(header) - 1)
        rows[cells[0]] = dict(zip(header, cells, strict=False))
    return rows


@contextmanager
def agentix_up(data_dir: Path, args: list[str] = (), extra_env: dict[str, str] | None = None,
               python_flags: list[str] = ()) -> Iterator[UpProcess]:
    """`agentix up` running past its banner; Ctrl-C at the end, which must stop it cleanly.
    `python_flags` go to its interpreter (not to the services it starts)."""
    up = UpProcess(data_dir, list(args), extra_env, list(python_flags))
    try:
        up.wait_banner()
        yield up
    finally:
        code = up.interrupt()
    assert code == 0, up.output[-3000:]
