"""The docs a newcomer reads say what the code does: the 404 for another user's task, the body of
a new prompt version, every example with its input, the browser tests' setup and the URL formats
of the PostgreSQL and Redis tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "API.md").read_text()
README = (ROOT / "README.md").read_text()


def test_another_users_task_is_documented_as_404_not_403() -> None:
    errors = " ".join(API[API.index("- **Errors**"):API.index("- **Request id.**")].split())
    forbidden = errors[errors.index("403"):errors.index("404")]
    assert "another user" not in forbidden
    assert "another user's task" in errors[errors.index("404"):]


def test_admin_lists_and_the_prompt_version_body_are_documented() -> None:
    assert "POST /admin/prompts/{name}/versions {text, note?}" in API
    models = next(line for line in API.splitlines() if line.startswith("| `GET/POST /admin/models`"))
    prompts = next(line for line in API.splitlines() if line.startswith("| `GET /admin/prompts`"))
    assert "paginated" in models and "paginated" in prompts


def test_readme_walks_through_every_example_with_its_sample_input() -> None:
    for path in sorted((ROOT / "examples").glob("*.json")):
        dsl = json.loads(path.read_text())
        schema = next(n for n in dsl["nodes"] if n["kind"] == "input")["config"]["schema"]
        assert f"examples/{path.name}" in README
        assert json.dumps(schema["examples"][0]) in README, f"{path.name}: sample input not in the README"
    for step in ("agentix up", "/console", "agentix approve", "--reject", "--password-stdin"):
        assert step in README


def test_readme_test_section_has_the_browser_setup_and_the_url_formats() -> None:
    section = README[README.index("## Test"):README.index("## Configuration")]
    assert "cd tests/e2e/console && npm ci" in section
    assert re.search(r"AGENTIX_TEST_POSTGRES_URL=postgresql://\S+@\S+:\d+/\w+", section)
    assert re.search(r"AGENTIX_TEST_REDIS_URL=redis://\S+:\d+/\d+", section)
