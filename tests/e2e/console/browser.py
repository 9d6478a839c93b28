"""Running one browser scenario of tests/e2e/console/*.mjs, and skipping where no browser is."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CONSOLE_TESTS = Path(__file__).resolve().parent
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return "no /usr/bin/chromium (apt-get install chromium)"
    if shutil.which("node") is None:
        return "node is not installed"
    if not (CONSOLE_TESTS / "node_modules" / "playwright-core").is_dir():
        return "playwright-core missing (npm ci in tests/e2e/console)"
    return None


needs_browser = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def run_scenario(scenario: str, env: dict[str, str]) -> None:
    proc = subprocess.run(
        ["node", "run.mjs", scenario], cwd=CONSOLE_TESTS, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, f"console scenario {scenario!r} failed:\n{proc.stdout}\n{proc.stderr}"
    assert f"ok {scenario}" in proc.stdout
