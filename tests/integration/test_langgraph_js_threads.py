"""`/lg` driven by the real JS `@langchain/langgraph-sdk` under Node (`node --test`, the
tests in lg_js/): metadata search, history paging, a checkpoint's state, a stateless run."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.support import openai_server as oai
from tests.support.node import node_binary, node_env, npm_installed

FOLDER = Path(__file__).parent / "lg_js"


async def test_the_js_sdk_reads_history_and_searches_metadata(scripted: Settings, srv: oai.OpenAIServer) -> None:
    missing = npm_installed(FOLDER, "@langchain/langgraph-sdk")
    if missing:
        pytest.skip(missing)
    node = node_binary()
    assert node is not None
    srv.script([oai.reply("One."), oai.reply("Two."), oai.reply("Three."), oai.reply("Four."), oai.reply("Five."),
                oai.reply("Six.")])
    async with chat_stack(scripted) as stack:
        env = node_env()
        env.update(LG_URL=stack.gateways[0].url + "/lg", LG_KEY=mint_token(stack.settings, "js-user"))
        done = await asyncio.to_thread(subprocess.run, [node, "--test", "--test-reporter=tap", "--test-concurrency=1",
                                        "threads.test.mjs"],
                                       cwd=FOLDER, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        assert "# pass 3" in done.stdout and "# fail 0" in done.stdout, done.stdout[-2000:]
