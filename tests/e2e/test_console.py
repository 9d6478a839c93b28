"""Issue 7: the web console in headless Debian chromium. The scenarios live in
tests/e2e/console/*.mjs (playwright-core driving /usr/bin/chromium); this wrapper starts the
suite, a scripted OpenAI-protocol server that streams at a watchable pace, an admin user, and
fails when a scenario fails. Screenshots land in artifacts/screenshots/."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shared.bus import Bus
from shared.contract.base import utcnow
from shared.contract.heartbeat import Heartbeat
from tests.e2e.conftest import RunningSuite, start_suite
from tests.support.openai_server import OpenAIServer, reply

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_TESTS = Path(__file__).resolve().parent / "console"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
# Order matters only for screenshots and speed: `models` makes the scripted server the active
# model through the UI; the run scenarios make sure of it themselves over the API. `chain` clears
# the chain and makes `offline` active; `parked` runs on it (and makes sure of it itself).
SCENARIOS = ["login", "models", "run", "approve", "reload", "offline", "kb", "tour", "newcomer", "chain", "parked"]
ANSWER = (
    "Agentix streams every token of a run over server-sent events. Each event carries its position "
    "in the task's log, so a browser that reconnects or reloads asks for what came after the last "
    "id it saw and gets exactly that: nothing lost, nothing twice. The console keeps the text it "
    "already showed and continues from there."
)


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return "no /usr/bin/chromium (apt-get install chromium)"
    if shutil.which("node") is None:
        return "node is not installed"
    if not (CONSOLE_TESTS / "node_modules" / "playwright-core").is_dir():
        return "playwright-core missing (npm ci in tests/e2e/console)"
    return None


pytestmark = pytest.mark.e2e
needs_browser = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_console_logic() -> None:
    """SSE parsing, at-most-once event folding, DAG layout and diff: node's test runner."""
    proc = subprocess.run(
        ["node", "--test", "unit/"], cwd=CONSOLE_TESTS, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "# fail 0" in proc.stdout and "# pass 0" not in proc.stdout


@pytest.fixture(scope="module")
def running_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSuite]:
    """The console scenarios change the model chain: they get a suite of their own. One user
    drives every scenario of a module within a minute or two, far past a person's pace: the rate
    limit (a test of its own elsewhere) is set out of the way."""
    running = start_suite(tmp_path_factory.mktemp("console-suite"), {"AGENTIX_RATE_LIMIT_PER_MIN": "100000"})
    yield running
    running.suite.stop()
    running.nats.cleanup()


@pytest.fixture(scope="module")
def scripted_llm() -> Iterator[OpenAIServer]:
    server = OpenAIServer().start_in_thread()
    # ~80 chunks 40 ms apart: slow enough to reload mid-stream, fast enough for the suite.
    server.script([], then=reply(ANSWER, chunk_chars=4, delay_s=0.04))
    yield server
    server.stop_thread()


@pytest.fixture(scope="module")
def console_env(running_suite: RunningSuite, scripted_llm: OpenAIServer) -> dict[str, str]:
    user, password = "console-admin", secrets.token_urlsafe(16)
    added = subprocess.run(
        # `--password=…`: a random password may begin with "-", which argparse would take for an option.
        [sys.executable, "-m", "services.gateway", "user", "add", user, "--admin", f"--password={password}"],
        env=running_suite.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert added.returncode == 0, f"could not create the console user: {added.stdout}{added.stderr}"
    page = httpx.get(f"{running_suite.url}/console/", timeout=10)
    assert page.status_code == 200 and "/console/js/app.js" in page.text, (
        "the console is not served at /console/ (services.gateway.console.mount_console(app) in app.py)"
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "CONSOLE_URL": running_suite.url,
        "CONSOLE_USER": user,
        "CONSOLE_PASSWORD": password,
        "LLM_URL": scripted_llm.url,
        "SCREENSHOT_DIR": str(SCREENSHOTS),
        "EXAMPLES_DIR": str(ROOT / "examples"),
        # A second, regular user whose KB the admin must see with its owner (no user API: a token).
        "COLLEAGUE_USER": "console-colleague",
        "COLLEAGUE_TOKEN": running_suite.token("console-colleague"),
    }


def run_scenario(scenario: str, env: dict[str, str]) -> None:
    proc = subprocess.run(
        ["node", "run.mjs", scenario], cwd=CONSOLE_TESTS, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, f"console scenario {scenario!r} failed:\n{proc.stdout}\n{proc.stderr}"
    assert f"ok {scenario}" in proc.stdout


@needs_browser
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_console_scenario(scenario: str, console_env: dict[str, str]) -> None:
    run_scenario(scenario, console_env)


@pytest.fixture
def ghost_instance(running_suite: RunningSuite, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A service instance that beats every 0.5 s until the browser test writes the stop file,
    then falls silent like a killed process."""
    stop_file = tmp_path / "stop-ghost"
    instance = f"ghost-{secrets.token_hex(3)}"
    finished = threading.Event()

    async def beat() -> None:
        bus = await Bus.connect(running_suite.settings, name="e2e-ghost")
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
def test_console_marks_a_silent_instance_stale(console_env: dict[str, str], ghost_instance: dict[str, str]) -> None:
    run_scenario("stale", {**console_env, **ghost_instance})
