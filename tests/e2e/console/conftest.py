"""What the console's browser tests share: one suite for the whole package (the console, chat and
MCP pages), a scripted OpenAI-protocol server that streams at a watchable pace, an admin user,
and the runner of the scenarios (tests/e2e/console/*.mjs: playwright-core driving Debian's
chromium). Starting the suite once for the three pages, not once per page, saves a suite start
(several seconds) per module; every scenario sets up the model chain and scripts it needs."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import RunningSuite, start_suite
from tests.e2e.console.browser import ROOT, SCREENSHOTS, Scenarios
from tests.support.openai_server import OpenAIServer, reply

ANSWER = (
    "Agentix streams every token of a run over server-sent events. Each event carries its position "
    "in the task's log, so a browser that reconnects or reloads asks for what came after the last "
    "id it saw and gets exactly that: nothing lost, nothing twice. The console keeps the text it "
    "already showed and continues from there."
)


@pytest.fixture(scope="package")
def console_suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSuite]:
    """The console scenarios change the model chain: they get a suite of their own. One user
    drives every scenario within a few minutes, far past a person's pace: the rate limit (a test
    of its own elsewhere) is set out of the way."""
    running = start_suite(tmp_path_factory.mktemp("console-suite"), {"AGENTIX_RATE_LIMIT_PER_MIN": "100000"})
    yield running
    running.stop()


@pytest.fixture(scope="package")
def scripted_llm() -> Iterator[OpenAIServer]:
    server = OpenAIServer().start_in_thread()
    # ~80 chunks 40 ms apart: slow enough to reload mid-stream, fast enough for the suite.
    server.script([], then=reply(ANSWER, chunk_chars=4, delay_s=0.04))
    yield server
    server.stop_thread()


@pytest.fixture(scope="package")
def console_env(console_suite: RunningSuite, scripted_llm: OpenAIServer) -> dict[str, str]:
    user, password = "console-admin", secrets.token_urlsafe(16)
    added = subprocess.run(
        # `--password=…`: a random password may begin with "-", which argparse would take for an option.
        [sys.executable, "-m", "services.gateway", "user", "add", user, "--admin", f"--password={password}"],
        env=console_suite.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert added.returncode == 0, f"could not create the console user: {added.stdout}{added.stderr}"
    page = httpx.get(f"{console_suite.url}/console/", timeout=10)
    assert page.status_code == 200 and "/console/assets/index.js" in page.text, (
        "the console is not served at /console/ (services.gateway.console.mount_console(app) in app.py)"
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "CONSOLE_URL": console_suite.url,
        "CONSOLE_USER": user,
        "CONSOLE_PASSWORD": password,
        "LLM_URL": scripted_llm.url,
        "SCREENSHOT_DIR": str(SCREENSHOTS),
        "EXAMPLES_DIR": str(ROOT / "examples"),
        # A second, regular user whose KB the admin must see with its owner (no user API: a token).
        "COLLEAGUE_USER": "console-colleague",
        "COLLEAGUE_TOKEN": console_suite.token("console-colleague"),
    }


@pytest.fixture(scope="package")
def scenarios(console_env: dict[str, str]) -> Iterator[Scenarios]:
    runner = Scenarios(console_env)
    yield runner
    runner.close()
