"""Test doubles of the engine's ports for unit tests: an in-process LLM implementing the LLM
protocol (scripted answers, streamed word by word, real budget charging), a minimal ReAct
AgentRunner over it, and a helper to run a DSL document end to end in memory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from services.dispatcher.engine.compile import compile_plan
from services.dispatcher.engine.context import Deps, TaskSpec
from services.dispatcher.engine.memory import EventLog, LocalTools, MemoryCheckpointStore
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.runner import Runner, RunOutcome
from services.dispatcher.llm.api import (
    LLM,
    AgentTurn,
    Delta,
    DeltaSink,
    EventEmit,
    LLMRequest,
    LLMResult,
    TokenBudget,
    ToolCaller,
    ToolCallRequest,
)
from shared.contract.events import ToolCallEvent, ToolResultEvent
from shared.contract.models import Usage

Script = Callable[[LLMRequest], Awaitable[str | LLMResult] | str | LLMResult]


@dataclass
class FakeLLM:
    """Answers with `script(request)` (sync or async; a str or a full LLMResult). Default: echoes
    the last user message. Streams word deltas when `on_delta` is given; charges the budget with
    one token per word of prompt and answer."""

    script: Script | None = None
    revision: int = 1
    requests: list[LLMRequest] = field(default_factory=list)

    @property
    def chain_revision(self) -> int:
        return self.revision

    async def complete(self, request: LLMRequest, *, budget: TokenBudget | None = None,
                       on_delta: DeltaSink | None = None) -> LLMResult:
        self.requests.append(request)
        answer: Any = request.messages[-1]["content"] if self.script is None else self.script(request)
        if asyncio.iscoroutine(answer):
            answer = await answer
        result = answer if isinstance(answer, LLMResult) else LLMResult(text=str(answer), model=request.model or "fake")
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in request.messages)
        result.usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=len(result.text.split()),
                             models=[result.model])
        if on_delta is not None:
            for word in result.text.split(" "):
                await on_delta(Delta("token", word + " "))
        if budget is not None:
            budget.charge(result.usage.total_tokens)
        return result


async def react(llm: LLM, turn: AgentTurn, *, caller: ToolCaller, emit: EventEmit,
                budget: TokenBudget | None) -> LLMResult:
    """A small ReAct loop used as the AgentRunner in engine tests."""
    messages = list(turn.request.messages)
    usage = Usage()
    for _ in range(turn.max_steps):
        request = LLMRequest(messages=messages, model=turn.request.model,
                             tools=[{"type": "function", "function": {"name": t.name}} for t in turn.tools])
        result = await llm.complete(request, budget=budget)
        usage = usage.add(result.usage)
        if not result.tool_calls:
            result.usage = usage
            return result
        for call in result.tool_calls:
            await emit(ToolCallEvent(task_id="", call_id=call.id, tool=call.name, args=call.arguments))
            reply = await caller.call(call.name, {**call.arguments}, turn.meta)
            await emit(ToolResultEvent(task_id="", call_id=call.id, ok=reply.ok, duration_ms=0.0))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(reply.result)})
    return LLMResult(text="(max steps)", model="fake", usage=usage)


def tool_call(name: str, **args: Any) -> LLMResult:
    return LLMResult(text="", model="fake", tool_calls=[ToolCallRequest(id=f"c_{name}", name=name, arguments=args)])


@dataclass
class Harness:
    """One task run in memory: the same store/events across runs (resume, retry)."""

    dsl: dict[str, Any]
    llm: FakeLLM = field(default_factory=FakeLLM)
    tools: LocalTools = field(default_factory=LocalTools)
    store: MemoryCheckpointStore = field(default_factory=MemoryCheckpointStore)
    events: EventLog = field(default_factory=EventLog)
    task_id: str = "t1"
    input: dict[str, Any] = field(default_factory=dict)
    token_budget: int | None = None
    timeout_s: float | None = None
    parallelism: int = 8
    check_tools: bool = False
    runner: Runner | None = None

    def make_runner(self, retry: int = 0) -> Runner:
        registry = list(self.tools.descriptors.values()) if self.check_tools else None
        plan = compile_plan(self.dsl, registry)
        task = TaskSpec(task_id=self.task_id, user_id="u1", input=self.input, token_budget=self.token_budget,
                        timeout_s=self.timeout_s, retry=retry, prompts={"support_system": "Be kind."},
                        prompt_versions={"support_system": 3})
        self.runner = Runner(plan, task, Deps(llm=self.llm, tools=self.tools, store=self.store,
                                              events=self.events, agent=react),
                             parallelism=self.parallelism)
        return self.runner

    async def run(self, decisions: dict[str, Decision] | None = None, retry: int = 0) -> RunOutcome:
        return await self.make_runner(retry).run(decisions)

    def types(self) -> list[str]:
        return [e.type for e in self.events.events]

    def of(self, kind: str, node_id: str | None = None) -> list[Any]:
        return [e for e in self.events.events if e.type == kind and (node_id is None or e.node_id == node_id)]


def graph(nodes: list[dict[str, Any]], edges: list[tuple[str, ...]]) -> dict[str, Any]:
    """Shorthand: edges as (source, target) or (source, target, handle)."""
    return {
        "version": "1",
        "nodes": nodes,
        "edges": [{"source": e[0], "target": e[1], **({"sourceHandle": e[2]} if len(e) > 2 else {})}
                  for e in edges],
    }


def node(node_id: str, kind: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "kind": kind, "config": config}
