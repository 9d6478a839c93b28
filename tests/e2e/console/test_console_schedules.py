"""The console's Schedules and Hooks pages in headless chromium (scenario `schedules` in
tests/e2e/console/schedules.mjs), against the whole suite: a five-field cron is refused with the
server's reason next to the cron field; an hourly schedule made on the page shows its next fire
times, runs now (the fire in its history, linking the task's run page), is paused and deleted;
a hook made on the page shows its secret once, which signs a call its URL accepts, and disabled
from the page it refuses the next call."""

from __future__ import annotations

import pytest

from tests.e2e.console.browser import Scenarios, needs_browser

pytestmark = pytest.mark.e2e


@needs_browser
def test_console_schedules_and_hooks(scenarios: Scenarios) -> None:
    scenarios.run("schedules")
