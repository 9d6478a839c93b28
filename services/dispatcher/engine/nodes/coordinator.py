"""`coordinator`: a lead model decomposes the goal into one brief per expert (JSON), the experts
run in parallel in isolated contexts (each its own messages; agent-as-tool through the agent
runner when it has tools — never a coordinator), long results are summarised, timed-out experts
are skipped and named, and the lead synthesises the answer (streamed).

An expert can never start a coordinator: the DSL gives experts no way to name one, and, should a
tool ever run a graph in-process (agent-as-tool), `run` refuses while an expert is running
(`nested_coordinator`) — the marker is a context variable, so it follows the expert's tasks."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from services.dispatcher.engine.context import NodeContext, NodeError
from services.dispatcher.engine.gather import gather_all
from services.dispatcher.engine.nodes.agent import parse_json_output
from services.dispatcher.llm.api import BudgetExceeded, LLMError, LLMRequest
from shared.contract.dsl import CoordinatorConfig, Expert
from shared.contract.events import ExpertEndEvent, ExpertStartEvent

LONG_RESULT = 2000
SUMMARY_LIMIT = 500
# The expert (coordinator node id, expert name) whose work the current task is doing, if any.
_EXPERT: ContextVar[tuple[str, str] | None] = ContextVar("agentix_coordinator_expert", default=None)

DECOMPOSE = (
    "You lead a team of experts. Split the goal into one brief per expert: what that expert must "
    "find out or produce, self-contained (the expert sees nothing else). Answer with JSON only: "
    '{"briefs": {"<expert name>": "<brief>", ...}}.'
)
SYNTHESISE = (
    "You lead a team of experts. Using their results, write the final answer to the goal. "
    "Mention any expert that did not deliver."
)


async def run(ctx: NodeContext) -> dict[str, Any]:
    if (inside := _EXPERT.get()) is not None:
        raise NodeError("nested_coordinator", f"node {ctx.node.id!r}: expert {inside[1]!r} of coordinator "
                        f"{inside[0]!r} cannot start a coordinator")
    config: CoordinatorConfig = ctx.node.config
    goal = ctx.render("config.goal")
    briefs = await _decompose(ctx, config, goal)
    gate = asyncio.Semaphore(config.max_parallel)

    async def expert_job(index: int, expert: Expert) -> dict[str, Any]:
        async with gate:
            return await _run_expert(ctx, config, index, expert, briefs[expert.name])

    reports = await gather_all([expert_job(i, e) for i, e in enumerate(config.experts)])
    answer = await _synthesise(ctx, config, goal, reports)
    return {"answer": answer, "experts": reports}


async def _decompose(ctx: NodeContext, config: CoordinatorConfig, goal: str) -> dict[str, str]:
    roster = "\n".join(f"- {e.name}: {e.system[:300]}" for e in config.experts)
    request = LLMRequest(
        messages=[{"role": "system", "content": DECOMPOSE},
                  {"role": "user", "content": f"Goal:\n{goal}\n\nExperts:\n{roster}"}],
        model=config.lead_model, json_output=True,
    )
    result = await ctx.complete(request, stream=False)
    try:
        parsed = parse_json_output(ctx.node.id, result.text)
    except NodeError:
        parsed = {}
    raw = parsed.get("briefs", parsed) if isinstance(parsed, dict) else {}
    briefs: dict[str, str] = {}
    for expert in config.experts:
        brief = raw.get(expert.name) if isinstance(raw, dict) else None
        # An expert the lead forgot still gets the whole goal rather than nothing.
        briefs[expert.name] = brief.strip() if isinstance(brief, str) and brief.strip() else goal
    return briefs


async def _run_expert(ctx: NodeContext, config: CoordinatorConfig, index: int, expert: Expert,
                      brief: str) -> dict[str, Any]:
    await ctx.emit(ExpertStartEvent(task_id=ctx.task.task_id, name=expert.name, brief=brief))
    report: dict[str, Any] = {"name": expert.name, "brief": brief, "result": None, "status": "done"}
    marker = _EXPERT.set((ctx.node.id, expert.name))  # copied into every task the expert starts
    try:
        async with asyncio.timeout(config.expert_timeout_s):
            system = ctx.render(f"config.experts[{index}].system")
            request = LLMRequest(messages=[{"role": "system", "content": system},
                                           {"role": "user", "content": brief}],
                                 model=expert.model, stream=False)
            tools = await ctx.tools_for(expert.tools)
            result = await (ctx.run_agent(request, tools, 8) if tools else ctx.complete(request, stream=False))
        report["result"] = await _shorten(ctx, expert, result.text)
    except (BudgetExceeded, asyncio.CancelledError):
        raise
    except TimeoutError:
        report["status"] = "timeout"
    except (NodeError, LLMError) as exc:
        report.update(status="failed", error=exc.message)
    finally:
        _EXPERT.reset(marker)
    await ctx.emit(ExpertEndEvent(task_id=ctx.task.task_id, name=expert.name, status=report["status"]))
    return report


async def _shorten(ctx: NodeContext, expert: Expert, text: str) -> str:
    """Results over LONG_RESULT characters are summarised to ≤ SUMMARY_LIMIT (cut if that fails)."""
    if len(text) <= LONG_RESULT:
        return text
    request = LLMRequest(
        messages=[{"role": "system", "content": f"Summarise the text in at most {SUMMARY_LIMIT} characters. "
                   "Keep facts, numbers and conclusions."},
                  {"role": "user", "content": text}],
        model=expert.model, max_tokens=200, stream=False,
    )
    try:
        summary = (await ctx.complete(request, stream=False)).text.strip()
    except LLMError:
        summary = ""
    return (summary or text)[:SUMMARY_LIMIT]


async def _synthesise(ctx: NodeContext, config: CoordinatorConfig, goal: str,
                      reports: list[dict[str, Any]]) -> str:
    delivered = [r for r in reports if r["status"] == "done"]
    skipped = [r["name"] for r in reports if r["status"] == "timeout"]
    failed = [r["name"] for r in reports if r["status"] == "failed"]
    parts = [f"Goal:\n{goal}", "Expert results:"]
    parts += [f"## {r['name']}\nBrief: {r['brief']}\nResult: {r['result']}" for r in delivered] or ["(none)"]
    if skipped:
        parts.append(f"Timed out and skipped: {', '.join(skipped)}")
    if failed:
        parts.append(f"Failed: {', '.join(failed)}")
    request = LLMRequest(messages=[{"role": "system", "content": SYNTHESISE},
                                   {"role": "user", "content": "\n\n".join(parts)}],
                         model=config.lead_model)
    return (await ctx.complete(request)).text
