"""The console's Chat page in headless chromium (scenarios in tests/e2e/console/chat.mjs), on a
the console package's suite, whose active model is the scripted OpenAI-protocol server; each scenario
scripts the answers it needs: a streamed answer replaced by the stored one (with its thinking
and tool step folded), pin/rename/delete, a plan approved while a second message waits its turn,
Stop keeping the partial answer, and a reload mid-answer that re-attaches and finishes it."""

from __future__ import annotations

import pytest

from tests.e2e.console.browser import Scenarios, needs_browser

pytestmark = pytest.mark.e2e


@needs_browser
@pytest.mark.parametrize("scenario", ["chat", "chat_queue", "chat_stop", "chat_reload"])
def test_console_chat(scenario: str, scenarios: Scenarios) -> None:
    scenarios.run(scenario)
