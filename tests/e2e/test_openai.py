"""The README's `openai` client lines against the suite started as `agentix up` starts it (every
service its own process, the offline model answering): the models, a whole and a streamed
completion, and a conversation kept by header."""

from __future__ import annotations

import httpx
import pytest
from openai import OpenAI

from tests.e2e.conftest import RunningSuite

pytestmark = pytest.mark.e2e


def test_the_openai_client_of_the_readme_talks_to_agentix_up(running_suite: RunningSuite) -> None:
    client = OpenAI(base_url=f"{running_suite.url}/v1", api_key=running_suite.token("reader"), max_retries=0,
                    timeout=60)
    assert {"agentix-react", "agentix-direct", "agentix-plan"} <= {m.id for m in client.models.list()}
    answer = client.chat.completions.create(model="agentix-react", messages=[{"role": "user", "content": "Hi"}])
    assert answer.choices[0].message.content and answer.choices[0].finish_reason == "stop"

    raw = client.chat.completions.with_raw_response.create(
        model="agentix-direct", stream=True, extra_headers={"X-Agentix-Conversation": "new"},
        messages=[{"role": "user", "content": "Remember the word teal."}])
    conversation = raw.headers["X-Agentix-Conversation-Id"]
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text
    again = client.chat.completions.create(
        model="agentix-direct", messages=[{"role": "user", "content": "Which word?"}],
        extra_headers={"X-Agentix-Conversation-Id": conversation})
    assert again.choices[0].message.content
    # The first turn's answer was written before the second turn ran (one run at a time, in order).
    said = httpx.get(f"{running_suite.url}/api/v1/conversations/{conversation}/messages",
                     headers=running_suite.headers("reader"), timeout=10).json()["items"]
    assert [(m["role"], m["content"]) for m in said[:3]] == [
        ("user", "Remember the word teal."), ("assistant", text), ("user", "Which word?")]
