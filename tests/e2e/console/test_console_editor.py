"""Issue 30: the workflow editor in headless chromium (scenarios in tests/e2e/console/editor.mjs),
on the console package's suite: branch_fanout.json built from an empty canvas by mouse, validated
live, undone and redone, saved, reloaded, versioned and run with its parallel nodes lit up; every
example imported and exported unchanged; copy and paste between tabs; an approval asked in place
on its node; and a 200-node workflow's drag and pan frame rates and validation round trip
(written to artifacts/console-perf.json)."""

from __future__ import annotations

import pytest

from tests.e2e.console.browser import Scenarios, needs_browser

pytestmark = pytest.mark.e2e


@needs_browser
@pytest.mark.parametrize(
    "scenario", ["editor_build", "editor_examples", "editor_clipboard", "editor_approval", "editor_perf"]
)
def test_console_editor(scenario: str, scenarios: Scenarios) -> None:
    scenarios.run(scenario)
