"""Running the browser scenarios of tests/e2e/console/*.mjs, and skipping where no browser is.

The scenarios run in one `node run.mjs --serve` process for the whole package, which starts
chromium once and gives each scenario a context of its own: a node process and a chromium launch
per scenario cost ~3 s each time."""

from __future__ import annotations

import functools
import json
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.node import node_binary, node_env, npm_installed

ROOT = Path(__file__).resolve().parents[3]
CONSOLE_TESTS = Path(__file__).resolve().parent
CONSOLE_WEB = ROOT / "services" / "gateway" / "console" / "web"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
SCENARIO_TIMEOUT_S = 240.0


@functools.cache
def _missing() -> str | None:
    """Why the scenarios cannot run here, else None; installs playwright-core from the folder's
    lockfile on first use, so the README's test command runs them on a fresh machine too."""
    if not CHROMIUM.exists():
        return "no /usr/bin/chromium (apt-get install chromium)"
    return npm_installed(CONSOLE_TESTS, "playwright-core")


needs_browser = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


class Scenarios:
    """The scenario runner process; started at the first scenario, and again if it died."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def run(self, scenario: str, extra_env: dict[str, str] | None = None) -> None:
        """Run one scenario; fails with everything the runner printed for it unless it passed."""
        proc = self._running()
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"scenario": scenario, "env": extra_env or {}}) + "\n")
        proc.stdin.flush()
        printed: list[str] = []
        deadline = time.monotonic() + SCENARIO_TIMEOUT_S
        while (line := self._next_line(deadline)) != f"done {scenario}":
            if line is None:  # the runner died or hung: the next scenario gets a new one
                self.close()
                raise AssertionError(f"console scenario {scenario!r} did not finish:\n" + "\n".join(printed))
            printed.append(line)
        assert any(line.startswith(f"ok {scenario} ") for line in printed), (
            f"console scenario {scenario!r} failed:\n" + "\n".join(printed))

    def close(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.stdin is not None:
            proc.stdin.close()  # the runner closes its browser and leaves
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _running(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.lines = queue.Queue()
            self.proc = subprocess.Popen(
                [node_binary() or "node", "run.mjs", "--serve"], cwd=CONSOLE_TESTS, env=node_env(self.env), text=True,
                bufsize=1,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            )
            threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()
        return self.proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)  # the runner's output ended: it is gone

    def _next_line(self, deadline: float) -> str | None:
        try:
            return self.lines.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            return None
