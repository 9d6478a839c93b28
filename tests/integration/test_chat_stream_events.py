"""The events a chat run streams while the model works: reasoning as `thinking.start` /
`thinking.delta` / `thinking.end` around each block, a tool call's arguments as `tool.input`
pieces while the model writes them (then `tool.call` with the whole arguments and `tool.result`
with the result itself). Real NATS, dispatcher and gateway; the scripted model server streams."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from shared.bus.tools import ToolContext, ToolRegistry
from shared.settings import Settings
from tests.integration.chat_support import ENDED, chat_stack, events_of, new_conversation, run_state, say
from tests.support import openai_server as oai


class CityArgs(BaseModel):
    city: str


def weather_tools() -> ToolRegistry:
    registry = ToolRegistry("go")

    @registry.tool(name="weather", title="Weather", description="The weather in a city.")
    async def weather(args: CityArgs, ctx: ToolContext) -> dict[str, Any]:
        return {"temp": f"3C in {args.city}", "wind": "calm"}

    return registry


async def test_reasoning_blocks_and_tool_arguments_stream_as_their_own_events(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    args = {"city": "Oslo, the capital of Norway"}
    srv.script([
        oai.reply(reasoning="I should look the weather up.", tool_calls=[oai.tool_call("weather", args, id="w1")]),
        oai.reply("It is 3C.", reasoning="Now I can answer."),
    ])
    async with chat_stack(scripted, tools=weather_tools()) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice)
        run_id = (await say(alice, conversation, "Weather in Oslo?"))["run"]["id"]
        frames = await events_of(alice, run_id)
        assert (await run_state(alice, run_id, ENDED))["state"] == "succeeded"
    kinds = [f.event for f in frames]
    assert "thinking" not in kinds
    # Two reasoning blocks, each opened and closed once, with its text in between.
    blocks: list[list[str]] = []
    for frame in frames:
        if frame.event == "thinking.start":
            blocks.append([])
        elif frame.event == "thinking.delta":
            blocks[-1].append(frame.data["text"])
        elif frame.event == "thinking.end":
            blocks[-1].append("<end>")
    assert ["".join(b) for b in blocks] == ["I should look the weather up.<end>", "Now I can answer.<end>"]
    # The first block ends before the tool call's arguments stream; the second before the answer.
    order = [kinds.index(k) for k in ("thinking.end", "tool.input", "tool.call", "tool.result")]
    assert order == sorted(order)
    second_end = len(kinds) - 1 - kinds[::-1].index("thinking.end")
    assert second_end < kinds.index("token")
    pieces = [f.data for f in frames if f.event == "tool.input"]
    # (pieces that arrive while the previous one is still being published are merged)
    assert {(p["call_id"], p["tool"], p["node_id"]) for p in pieces} == {("w1", "weather", "ans")}
    assert json.loads("".join(p["delta"] for p in pieces)) == args
    [call] = [f.data for f in frames if f.event == "tool.call"]
    [result] = [f.data for f in frames if f.event == "tool.result"]
    assert call["args"] == args and result["ok"] is True
    assert result["result"] == {"temp": "3C in Oslo, the capital of Norway", "wind": "calm"}
    # Streamed pieces are on the token channel, so `/stream` carries them with the tokens.
    assert all(f.id is not None for f in frames)


async def test_a_secret_split_across_streamed_arguments_never_gets_out(
    scripted: Settings, srv: oai.OpenAIServer,
) -> None:
    secret = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX"
    srv.script([oai.reply(tool_calls=[oai.tool_call("weather", {"city": f"Oslo {secret}"}, id="w1")]),
                oai.reply("Done.")])
    async with chat_stack(scripted, tools=weather_tools()) as stack:
        alice = await stack.client()
        conversation = await new_conversation(alice)
        run_id = (await say(alice, conversation, "Weather?"))["run"]["id"]
        frames = await events_of(alice, run_id)
    streamed = "".join(f.data["delta"] for f in frames if f.event == "tool.input")
    assert "[REDACTED:api_key]" in streamed and "ABCDEFGH" not in json.dumps([f.data for f in frames])
