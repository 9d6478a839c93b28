"""ReAct over real NATS tool services and the scripted model server: parallel tool calls,
injected values never shown to the model, high-risk refusal, max_steps."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from services.dispatcher.engine.agent_loop import AgentLoop
from services.dispatcher.engine.memory import EventLog
from services.dispatcher.engine.react import ReactAgent
from services.dispatcher.harness.redact_events import RedactingEvents
from services.dispatcher.llm.api import AgentTurn, LLMRequest, TokenBudget
from services.dispatcher.llm.chain_config import ModelControl
from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.redact import Redactor
from shared.bus import Bus
from shared.bus.tools import ToolClient, ToolContext, ToolRegistry, serve_tools
from shared.contract.events import EventBase, ToolCallEvent, ToolResultEvent
from shared.contract.models import ModelChain, ModelConfig
from shared.contract.tools import ToolMeta
from shared.settings import Settings
from tests.support import openai_server as oai

USER, SESSION = "user-7f3a9", "sess-42bd1"


class LookupArgs(BaseModel):
    query: str
    user_id: str


class NotesArgs(BaseModel):
    topic: str
    session_id: str


class RunCodeArgs(BaseModel):
    code: str


class Tools:
    """A tool service whose two agent tools only finish once both are running (so they must be
    called in parallel), and which records the arguments they really received."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.started = 0
        self.both = asyncio.Event()
        self.registry = ToolRegistry("go")
        reg = self.registry

        @reg.tool(name="lookup", title="Lookup", description="Search the user's documents.", inject=("user_id",))
        async def lookup(args: LookupArgs, ctx: ToolContext) -> dict[str, Any]:
            return await self._together("lookup", args.model_dump(), {"hits": [f"about {args.query}"]})

        @reg.tool(name="notes", title="Notes", description="Read session notes.", inject=("session_id",))
        async def notes(args: NotesArgs, ctx: ToolContext) -> dict[str, Any]:
            return await self._together("notes", args.model_dump(), {"notes": [f"{args.topic} noted"]})

        @reg.tool(name="run_code", title="Run code", description="Execute Python.", high_risk=True)
        async def run_code(args: RunCodeArgs, ctx: ToolContext) -> dict[str, Any]:
            self.received.append(("run_code", args.model_dump()))
            return {"stdout": "42"}

    async def _together(self, name: str, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        self.received.append((name, args))
        self.started += 1
        if self.started >= 2:
            self.both.set()
        await asyncio.wait_for(self.both.wait(), 5)
        return result


@pytest.fixture
async def tools(bus: Bus) -> AsyncIterator[tuple[Tools, ToolClient]]:
    t = Tools()
    server = await serve_tools(bus, t.registry)
    yield t, ToolClient(bus, services=("go",))
    await server.drain(2)


def make_pool(settings: Settings, url: str, tmp: Path) -> ModelPool:
    cfg = ModelConfig(id="m", name="m", base_url=url, model="m")
    return ModelPool(
        settings, control=ModelControl(settings, chain=ModelChain(revision=1, active="m", models={"m": cfg}))
    )


def turn(descriptors: list[Any], prompt: str = "What do my docs and notes say about NATS?", **kw: Any) -> AgentTurn:
    return AgentTurn(
        node_id="ans",
        request=LLMRequest(messages=[{"role": "user", "content": prompt}]),
        tools=descriptors,
        meta=ToolMeta(task_id="t1", node_id="ans", user_id=USER, session_id=SESSION),
        inject={"user_id": USER, "session_id": SESSION, "kb": "handbook"},
        **kw,
    )


async def test_parallel_tool_calls_with_injected_values_hidden_from_the_model(
    srv: oai.OpenAIServer, tools: tuple[Tools, ToolClient], settings: Settings, tmp_path: Path
) -> None:
    t, client = tools
    srv.script(
        [
            # The model even tries to pick the user itself: it must be overridden.
            oai.reply(
                "Let me look.",
                tool_calls=[
                    oai.tool_call("lookup", {"query": "NATS", "user_id": "someone-else"}, id="c1"),
                    oai.tool_call("notes", {"topic": "NATS"}, id="c2"),
                ],
            ),
            oai.reply("Your docs are about NATS and your notes say NATS noted."),
        ]
    )
    events: list[EventBase] = []

    async def emit(event: EventBase) -> None:
        events.append(event)

    pool = make_pool(settings, srv.url, tmp_path)
    descriptors = [d for d in await client.list_tools() if d.name in ("lookup", "notes")]
    result = await ReactAgent()(pool.pinned(), turn(descriptors), caller=client, emit=emit, budget=TokenBudget(10_000))

    assert result.text == "Your docs are about NATS and your notes say NATS noted."
    assert sorted(t.received, key=lambda r: r[0]) == [
        ("lookup", {"query": "NATS", "user_id": USER}),
        ("notes", {"topic": "NATS", "session_id": SESSION}),
    ]
    seen = json.dumps([r["body"] for r in srv.requests()])
    assert USER not in seen and SESSION not in seen and "handbook" not in seen
    first = srv.requests()[0]["body"]
    params = {tool["function"]["name"]: tool["function"]["parameters"] for tool in first["tools"]}
    assert set(params["lookup"]["properties"]) == {"query"} and params["lookup"]["required"] == ["query"]
    assert set(params["notes"]["properties"]) == {"topic"}
    second = srv.requests()[1]["body"]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert {m["tool_call_id"] for m in second[2:]} == {"c1", "c2"}
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert {c.call_id for c in calls} == {"c1", "c2"} and all(r.ok for r in results) and len(results) == 2
    assert all(USER not in json.dumps(c.args) for c in calls)
    assert "".join(e.text for e in events if e.type == "token") == "Let me look." + result.text
    assert result.usage.models == ["m"] and result.usage.completion_tokens > 0
    await pool.aclose()


async def test_high_risk_tool_needs_the_node_to_allow_it(
    srv: oai.OpenAIServer, tools: tuple[Tools, ToolClient], settings: Settings, tmp_path: Path
) -> None:
    t, client = tools
    call = oai.reply("", tool_calls=[oai.tool_call("run_code", {"code": "print(42)"}, id="x1")])
    srv.script([call, oai.reply("refused"), call, oai.reply("ran")])
    events: list[EventBase] = []

    async def emit(event: EventBase) -> None:
        events.append(event)

    pool = make_pool(settings, srv.url, tmp_path)
    descriptors = [d for d in await client.list_tools() if d.name == "run_code"]
    await ReactAgent()(pool.pinned(), turn(descriptors), caller=client, emit=emit, budget=None)
    assert t.received == []
    refused = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not refused.ok and "approval_required" in (refused.error or "") and "high-risk" in (refused.error or "")
    fed_back = json.loads(srv.requests()[1]["body"]["messages"][-1]["content"])
    assert fed_back["error"]["code"] == "approval_required"

    await ReactAgent()(pool.pinned(), turn(descriptors, allow_high_risk=True), caller=client, emit=emit, budget=None)
    assert t.received == [("run_code", {"code": "print(42)"})]
    await pool.aclose()


async def test_stops_at_max_steps_and_forces_an_answer(
    srv: oai.OpenAIServer, tools: tuple[Tools, ToolClient], settings: Settings, tmp_path: Path
) -> None:
    _, client = tools
    # The model also echoes a secret into the call: the tool.call event must not carry it.
    looping = oai.reply("", tool_calls=[oai.tool_call("nonexistent", {"key": "sk-proj-ABCDEFGHIJKLMNOPQRST"}, id="n1")])
    srv.script([looping, looping], then=oai.reply("final answer"))
    pool = make_pool(settings, srv.url, tmp_path)
    descriptors = [d for d in await client.list_tools() if d.name == "run_code"]

    # Events leave through the task's redacting sink, as in the dispatcher.
    log = EventLog()
    sink = RedactingEvents(log, Redactor())

    result = await ReactAgent()(pool.pinned(), turn(descriptors, max_steps=2), caller=client, emit=sink.emit,
                                budget=None)
    assert result.text == "final answer"
    calls = [e for e in log.events if isinstance(e, ToolCallEvent)]
    assert len(calls) == 2 and all(c.args == {"key": "[REDACTED:api_key]"} for c in calls)
    bodies = [r["body"] for r in srv.requests()]
    assert [("tools" in b) for b in bodies] == [True, True, False]
    unknown = json.loads(bodies[1]["messages"][-1]["content"])
    assert unknown["error"]["code"] == "unknown_tool" and "run_code" in unknown["error"]["message"]
    assert "tool calls allowed" in bodies[2]["messages"][-1]["content"]
    await pool.aclose()


class KeptLoop:
    """A loop's state as a checkpoint kept it (what a dead dispatcher left)."""

    def __init__(self, state: AgentLoop) -> None:
        self.state = state

    async def save(self, state: Any) -> None:
        self.state = state


PROMPT = "What do my docs say about NATS?"
SEEN = "Your docs are ab"  # what clients saw of the final answer before the dispatcher died


def after_one_tool_turn() -> AgentLoop:
    """A loop that had asked `lookup` (its text streamed) and got the result, then died answering."""
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"query": "NATS"}'}}
    return AgentLoop(messages=[{"role": "user", "content": PROMPT},
                               {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'}], steps=1)


@pytest.mark.parametrize("regenerated", ["same", "different"])
async def test_a_taken_over_loop_does_not_stream_again_what_clients_saw(
    srv: oai.OpenAIServer, tools: tuple[Tools, ToolClient], settings: Settings, tmp_path: Path, regenerated: str,
) -> None:
    _, client = tools
    final = "Your docs are about NATS."
    if regenerated == "same":
        srv.script([oai.reply(final)])
    else:  # a sampled model answers otherwise: the seen text stands and the model continues it
        srv.script([oai.reply("Something else entirely."), oai.reply("out NATS, again.")])
    events: list[EventBase] = []

    async def emit(event: EventBase) -> None:
        events.append(event)

    pool = make_pool(settings, srv.url, tmp_path)
    descriptors = [d for d in await client.list_tools() if d.name == "lookup"]
    keeper = KeptLoop(after_one_tool_turn())
    result = await ReactAgent()(pool.pinned(), turn(descriptors, PROMPT, keeper=keeper, streamed="Let me look." + SEEN),
                                caller=client, emit=emit, budget=None)
    streamed_now = "".join(e.text for e in events if e.type == "token")
    assert result.text.startswith(SEEN) and SEEN + streamed_now == result.text
    assert result.text == (final if regenerated == "same" else SEEN + "out NATS, again.")
    if regenerated == "different":  # the continuation was asked with the seen text as the answer's start
        assert srv.requests()[-1]["body"]["messages"][-1] == {"role": "assistant", "content": SEEN}
    await pool.aclose()
