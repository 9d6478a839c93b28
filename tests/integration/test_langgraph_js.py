"""`/lg` with the real JS `@langchain/langgraph-sdk` under Node (`node --test`): its client on
assistants (a workflow's graph and schemas) and the store, and its React hook `useStream` mounted
headless (jsdom + React) on a thread that already has messages — the hook loads them, sends a
message and renders the streamed answer. The stack and the scripted model are set up here."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.chat_support import chat_stack
from tests.integration.test_langgraph_api import ask, lg
from tests.support import openai_server as oai
from tests.support.node import node_binary, node_env, npm_installed

FOLDER = Path(__file__).resolve().parent / "lg_js"
PLAN_ANSWER = "Oslo is the capital of Norway."
SLOW_ANSWER = "A slow answer, a few letters at a time, that a reload must not lose."
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_the_js_sdk_and_use_stream(scripted: Settings, srv: oai.OpenAIServer) -> None:
    missing = await asyncio.to_thread(npm_installed, FOLDER, "@langchain/langgraph-sdk")
    if missing:
        pytest.skip(missing)
    node = node_binary()
    assert node is not None
    async with chat_stack(scripted, real_tools=True) as stack:
        client = lg(stack, "js-user")
        api = await stack.client("js-user")
        dsl = json.loads((EXAMPLES / "approval.json").read_text())
        wf = (await api.post("/api/v1/workflows", json={"name": "Announce", "dsl": dsl})).json()["id"]
        # In the order asked: the two threads' first turns here, then the tests' runs.
        srv.script([oai.reply("The first answer."), oai.reply("A first take."),
                    oai.reply("The second answer, streamed.", chunk_chars=4),
                    oai.reply('{"steps": ["recall the capital"]}'), oai.reply(PLAN_ANSWER),
                    oai.reply(SLOW_ANSWER, chunk_chars=3, delay_s=0.05),
                    oai.reply("Another take."), oai.reply("The edited answer.")])
        thread = await client.threads.create()
        await client.runs.wait(thread["thread_id"], "chat-direct", input=ask("The first question?"))
        regen = await client.threads.create()
        await client.runs.wait(regen["thread_id"], "chat-direct", input=ask("Worth a second take?"))
        env = node_env()
        env.update(LG_URL=stack.gateways[0].url + "/lg", LG_KEY=mint_token(stack.settings, "js-user"),
                   WORKFLOW_ID=wf, THREAD_ID=thread["thread_id"], FIRST_QUESTION="The first question?",
                   FIRST_ANSWER="The first answer.", SECOND_ANSWER="The second answer, streamed.",
                   PLAN_THREAD_ID=(await client.threads.create())["thread_id"], PLAN_ANSWER=PLAN_ANSWER,
                   SLOW_THREAD_ID=(await client.threads.create())["thread_id"], SLOW_ANSWER=SLOW_ANSWER,
                   REGEN_THREAD_ID=regen["thread_id"], REGEN_QUESTION="Worth a second take?",
                   REGEN_FIRST="A first take.", REGEN_AGAIN="Another take.", EDITED_QUESTION="Edited, then?",
                   EDITED_ANSWER="The edited answer.")
        # Only this file: threads.test.mjs shares the folder but scripts its own model answers.
        done = await asyncio.create_subprocess_exec(node, "--test", "--test-reporter=tap", "use_stream.test.js",
                                                    cwd=FOLDER, env=env,
                                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = await asyncio.wait_for(done.communicate(), 300)
        report = out.decode()
        assert done.returncode == 0 and "# pass 5" in report and "# fail 0" in report, report[-6000:]
