"""`/v1` with the real Vercel AI SDK (`ai` + `@ai-sdk/openai`) under Node (`node --test`):
generateText and streamText with a local tool, on the provider's default model (the Responses
API) and its chat model (chat completions), each calling the tool and answering from its result.
The stack, the scripted model and an API key are set up here; the SDK's side is
`ai_js/ai_sdk.test.mjs`."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.integration.chat_support import ChatStack, chat_stack
from tests.support import openai_server as oai
from tests.support.nats_server import NatsServer
from tests.support.node import node_binary, node_env, npm_installed

FOLDER = Path(__file__).resolve().parent / "ai_js"
ANSWER = "It is 3C there, says the tool."


@pytest.fixture(scope="module")
async def srv() -> AsyncIterator[oai.OpenAIServer]:
    async with oai.OpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(nats_server: NatsServer, tmp_path_factory: pytest.TempPathFactory,
                srv: oai.OpenAIServer) -> AsyncIterator[ChatStack]:
    settings = make_settings(nats_server.url, tmp_path_factory.mktemp("ai-sdk") / "data", llm_base_url=srv.url,
                             llm_model="m", llm_api_key="k", llm_retry_attempts=1)
    async with chat_stack(settings) as chat:
        yield chat


async def api_key(stack: ChatStack, user: str) -> str:
    """A long-lived API key with scope `chat`, as a user would give the SDK."""
    client = await stack.client(user)
    made = await client.post("/api/v1/keys", json={"name": "ai-sdk", "scopes": ["chat"]})
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


async def test_the_ai_sdk_runs_its_tools_against_agentix(stack: ChatStack, srv: oai.OpenAIServer) -> None:
    missing = await asyncio.to_thread(npm_installed, FOLDER, "@ai-sdk/openai")
    if missing:
        pytest.skip(missing)
    node = node_binary()
    assert node is not None
    srv.reset()
    steps: list[oai.Step] = []
    for city in ("Oslo", "Rome", "Oslo", "Rome"):  # the file's four tests, in order
        steps += [oai.reply(tool_calls=[oai.tool_call("get_weather", {"city": city})]), oai.reply(ANSWER)]
    srv.script(steps)
    env = node_env()
    env.update(AI_URL=f"{stack.gateways[0].url}/v1", AI_KEY=await api_key(stack, "ai-sdk-user"), ANSWER=ANSWER)
    done = await asyncio.create_subprocess_exec(node, "--test", "--test-reporter=tap", "ai_sdk.test.mjs",
                                                cwd=FOLDER, env=env, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT)
    out, _ = await asyncio.wait_for(done.communicate(), 300)
    report = out.decode()
    assert done.returncode == 0 and "# pass 4" in report and "# fail 0" in report, report[-6000:]
    requests = srv.requests()
    assert len(requests) == 8
    # Every first step offered the SDK's tool; every second step carried its result back.
    assert all(r["body"]["tools"][0]["function"]["name"] == "get_weather" for r in requests[::2])
    assert all(r["body"]["messages"][-1]["role"] == "tool" for r in requests[1::2])
