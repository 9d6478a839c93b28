"""`agentix chat` as a real process, its input piped, against a real gateway and dispatcher whose
model is a scripted OpenAI-protocol server: a line becomes a message whose answer streams back;
Ctrl-C (SIGINT) mid-answer cancels the run and the partial answer is stored; a second Ctrl-C or
the end of input leaves; a plan is approved and its tool steps shown."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from shared.auth_tokens import mint_token
from shared.settings import Settings
from tests.integration.chat_support import ENDED, WAIT_S, ChatStack, chat_stack, run_state, thread
from tests.integration.test_gateway_chat_runs import PARTIAL, weather_tools
from tests.support import openai_server as oai

ROOT = Path(__file__).resolve().parents[2]


class Terminal:
    """The chat process and everything it has written so far."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out = ""

    async def until(self, pattern: str) -> re.Match[str]:
        """Read until the output (from its start) matches `pattern`."""
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(WAIT_S):
                while (found := re.search(pattern, self.out)) is None:
                    chunk = await self.proc.stdout.read(4096)
                    if not chunk:
                        raise AssertionError(f"the chat ended before {pattern!r}:\n{self.out}")
                    self.out += chunk.decode()
        except TimeoutError:
            raise AssertionError(f"no {pattern!r} in time:\n{self.out}") from None
        return found

    def type(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())

    async def end(self) -> int:
        """Close the input (Ctrl-D) and wait for the process to leave."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        async with asyncio.timeout(WAIT_S):
            self.out += (await self.proc.stdout.read()).decode()
            return await self.proc.wait()


@contextlib.asynccontextmanager
async def open_chat(stack: ChatStack, *args: str) -> AsyncIterator[Terminal]:
    token = mint_token(stack.settings, "alice")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentix", "chat", "--url", stack.gateways[0].url, "--token", token, *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )
    try:
        yield Terminal(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_ctrl_c_mid_answer_stops_the_run_and_keeps_the_partial(scripted: Settings,
                                                                      srv: oai.OpenAIServer) -> None:
    srv.script([oai.hang(PARTIAL, seconds=600)])  # then: the echo of the last user message
    async with chat_stack(scripted) as stack:
        async with open_chat(stack, "--mode", "direct") as term:
            conversation = (await term.until(r"conversation (c_\w+) \(mode direct"))[1]
            term.type("Tell me a long story.\n")
            await term.until(r"agent: \S")  # the answer is streaming
            term.proc.send_signal(signal.SIGINT)
            await term.until("⏹ stopped — the partial answer is kept in the conversation")
            term.type("Now just say hi.\n")
            await term.until("agent: echo: Now just say hi.\n")
            exit_code = await term.end()
        assert exit_code == 0, term.out
        shown = term.out.split("agent: ", 1)[1].split("\n", 1)[0]
        alice = await stack.client("alice")
        last_run = (await thread(alice, conversation))[-1]["run_id"]
        await run_state(alice, last_run, ENDED)  # its answer is written as it ends
        messages = await thread(alice, conversation)
        assert [(m["role"], m["message_type"]) for m in messages] == [
            ("user", "text"), ("assistant", "interrupted"), ("user", "text"), ("assistant", "text")]
        assert messages[1]["content"].strip() and messages[1]["content"] == shown
        assert PARTIAL.startswith(shown.strip())


async def test_a_second_ctrl_c_at_the_prompt_leaves(scripted: Settings) -> None:
    async with chat_stack(scripted) as stack:
        async with open_chat(stack) as term:
            term.type("Hello there\n")
            await term.until("agent: echo: Hello there\n")
            await term.until("you> $")
            term.proc.send_signal(signal.SIGINT)
            await term.until(r"Ctrl-C again or Ctrl-D leaves\)\n")
            term.proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(WAIT_S):
                assert await term.proc.wait() == 0


async def test_a_plan_is_shown_approved_and_carried_out_with_its_tool_steps(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    srv.script([oai.reply('{"steps": ["look up the weather in Oslo"]}'),
                oai.reply(tool_calls=[oai.tool_call("weather", {"city": "Oslo"})]),
                oai.reply("It is 3C in Oslo.")])
    async with chat_stack(scripted, tools=weather_tools()) as stack:
        async with open_chat(stack, "--mode", "plan") as term:
            term.type("What is the weather in Oslo?\n")
            await term.until(r"go ahead\? \[y/n\] $")
            term.type("y\n")
            await term.until("agent: It is 3C in Oslo.\n")
            exit_code = await term.end()
    assert exit_code == 0, term.out
    assert "look up the weather in Oslo" in term.out
    assert '⚙ weather({"city": "Oslo"})' in term.out and "⚙ ok" in term.out
    assert term.out.index("go ahead?") < term.out.index("⚙ weather") < term.out.index("It is 3C")


async def test_an_unknown_conversation_is_refused_plainly(scripted: Settings) -> None:
    async with chat_stack(scripted, with_dispatcher=False) as stack:
        async with open_chat(stack, "--conversation", "c_nope") as term:
            exit_code = await term.end()
    assert exit_code == 1 and "Not Found" in term.out and "Traceback" not in term.out

