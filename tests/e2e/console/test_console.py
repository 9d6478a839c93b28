"""Issue 7: the web console in headless Debian chromium. The scenarios live in
tests/e2e/console/*.mjs (playwright-core driving /usr/bin/chromium); these tests fail when a
scenario fails (the suite, the scripted model and the admin user are the package's: conftest.py).
Screenshots land in artifacts/screenshots/."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.bus import Bus
from shared.contract.base import utcnow
from shared.contract.heartbeat import Heartbeat
from tests.e2e.conftest import RunningSuite
from tests.e2e.console.browser import CONSOLE_WEB, Scenarios, needs_browser
from tests.support.node import node_binary, node_env

# Order matters only for screenshots and speed: `models` makes the scripted server the active
# model through the UI; the run scenarios make sure of it themselves over the API. `chain` clears
# the chain and makes `offline` active; `parked` runs on it (and makes sure of it itself).
SCENARIOS = ["login", "models", "run", "approve", "reload", "offline", "kb", "tour", "newcomer", "chain", "parked"]
pytestmark = pytest.mark.e2e


VITEST = CONSOLE_WEB / "node_modules" / "vitest" / "vitest.mjs"


@pytest.mark.skipif(node_binary() is None or not VITEST.exists(), reason="node or the console npm packages are missing")
def test_console_components() -> None:
    """The console's logic and components with vitest (services/gateway/console/web/src/**/*.test.*):
    SSE parsing, at-most-once event folding, layout, diff, the chat's Markdown, the editor's document."""
    proc = subprocess.run(
        [node_binary() or "node", str(VITEST), "run"], cwd=CONSOLE_WEB, env=node_env(), capture_output=True, text=True,
        timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " failed" not in proc.stdout and " passed" in proc.stdout, proc.stdout


@needs_browser
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_console_scenario(scenario: str, scenarios: Scenarios) -> None:
    scenarios.run(scenario)


@pytest.fixture
def ghost_instance(console_suite: RunningSuite, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A service instance that beats every 0.5 s until the browser test writes the stop file,
    then falls silent like a killed process."""
    stop_file = tmp_path / "stop-ghost"
    instance = f"ghost-{secrets.token_hex(3)}"
    finished = threading.Event()

    async def beat() -> None:
        bus = await Bus.connect(console_suite.settings, name="e2e-ghost")
        subject = bus.subjects.heartbeat("e2e-ghost", instance)
        started = utcnow()
        try:
            while not stop_file.exists() and not finished.is_set():
                await bus.publish(
                    subject,
                    Heartbeat(
                        service="e2e-ghost", instance=instance, version="e2e", started_at=started, interval_s=0.5
                    ),
                )
                await asyncio.sleep(0.5)
        finally:
            await bus.close()

    thread = threading.Thread(target=lambda: asyncio.run(beat()), name="ghost-heartbeat", daemon=True)
    thread.start()
    yield {"GHOST_INSTANCE": instance, "GHOST_STOP_FILE": str(stop_file)}
    finished.set()
    thread.join(10)


@needs_browser
def test_console_marks_a_silent_instance_stale(scenarios: Scenarios, ghost_instance: dict[str, str]) -> None:
    scenarios.run("stale", ghost_instance)
