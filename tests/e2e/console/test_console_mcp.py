"""The console's MCP servers page in headless chromium (scenario `mcp` in
tests/e2e/console/mcp.mjs): a real `mcp` SDK server wanting a bearer token, registered through
the page with that token as a header, connects with its two tools; the header never comes back;
disable, enable and delete work from the page."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import pytest

from tests.e2e.console.browser import Scenarios, needs_browser
from tests.support.mcp_server import McpServerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpServerProcess]:
    loop = asyncio.new_event_loop()  # one loop owns the child process from start to kill
    server = McpServerProcess(token=secrets.token_urlsafe(12))
    loop.run_until_complete(server.start())
    yield server
    loop.run_until_complete(server.kill())
    loop.close()


@needs_browser
def test_console_registers_an_mcp_server(scenarios: Scenarios, mcp_server: McpServerProcess) -> None:
    scenarios.run("mcp", {"MCP_URL": mcp_server.url, "MCP_TOKEN": mcp_server.token or ""})
