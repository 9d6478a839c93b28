"""The console's Keys page in headless chromium (scenario `keys` in tests/e2e/console/keys.mjs):
a chat-only key made on the page is shown once, listed by its prefix, accepted on `/v1` and
refused on `/api/v1`; a key without scopes is refused with the server's reason; revoked from the
page, it is refused at once."""

from __future__ import annotations

import pytest

from tests.e2e.console.browser import Scenarios, needs_browser

pytestmark = pytest.mark.e2e


@needs_browser
def test_console_makes_and_revokes_an_api_key(scenarios: Scenarios) -> None:
    scenarios.run("keys")
