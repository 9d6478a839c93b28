"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, server mode, pinned in
tests/e2e/mcp_conformance/package.json and its lockfile) against `/mcp` on the suite started as
`agentix up` starts it. Every scenario a product server can pass must pass; those that test a
conformance fixture's own tools, resources or prompts (`tools-call-image`, `prompts-get-simple`,
…) name things only the suite's reference server has, and are not run.

The suite's client sends no credentials, so the gateway runs with auth disabled (the case the
DNS-rebinding scenario is about: a local server a browser page could reach)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import RunningSuite, start_suite
from tests.support.node import node_binary, node_env, npm_installed

FOLDER = Path(__file__).parent / "mcp_conformance"
PACKAGE = "@modelcontextprotocol/conformance"
SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "completion-complete",
    "logging-set-level",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSuite]:
    missing = npm_installed(FOLDER, PACKAGE)
    if missing:
        pytest.skip(missing)
    running = start_suite(tmp_path_factory.mktemp("mcp-conformance"), {"AGENTIX_AUTH_DISABLED": "true"})
    yield running
    running.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_conformance_scenario_passes(suite: RunningSuite, scenario: str, tmp_path: Path) -> None:
    node = node_binary()
    assert node is not None
    cli = FOLDER / "node_modules" / PACKAGE / "dist" / "index.js"
    url = suite.url.replace("127.0.0.1", "localhost") + "/mcp"
    done = subprocess.run(
        [node, str(cli), "server", "--url", url, "--scenario", scenario, "-o", str(tmp_path)],
        cwd=FOLDER, env=node_env(), capture_output=True, text=True, timeout=300,
    )
    checks = [c for f in tmp_path.rglob("checks.json") for c in json.loads(f.read_text())]
    failed = [c for c in checks if c["status"] == "FAILURE"]
    assert checks, f"no checks recorded\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert not failed, json.dumps(failed, indent=1)[:4000]
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
