"""Running one node: its `node.start` event and span, its timeout, what its failure means (a
`NodeResult`, never an exception — except a budget overrun or cancellation, which stop the run),
and then, for a batch of finished nodes, the checkpoint of their results and their events."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from services.dispatcher.engine.checkpoint import CheckpointTooLarge, NodeState, WaitingApproval
from services.dispatcher.engine.compile import PlanNode
from services.dispatcher.engine.context import NodeContext, NodeError
from services.dispatcher.engine.nodes import HANDLERS
from services.dispatcher.engine.nodes.approval import Waiting
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.preview import preview
from services.dispatcher.engine.spans import mark_failed, node_span
from services.dispatcher.engine.state import RunState
from services.dispatcher.llm.api import BudgetExceeded, LLMError, ToolApprovalNeeded
from shared.contract.base import utcnow
from shared.contract.events import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    NodeEndEvent,
    NodeStartEvent,
    PlanEvent,
)
from shared.contract.models import Usage
from shared.contract.templates import TemplateProblem

# Node kinds whose result is a function of the task's input and earlier outputs alone: no model,
# tool or person is asked. A redelivery that runs one again gets the same result at no cost, so
# a batch of only these is checkpointed with the next write (before the next node that has
# effects starts, or at the end of the run), not on its own; its node.end is not held back.
RECOMPUTED = frozenset({"input", "branch", "output"})


@dataclass(slots=True)
class NodeResult:
    node_id: str
    status: Literal["done", "failed", "waiting", "decided"]
    output: Any = None
    error: str | None = None
    code: str | None = None
    usage: Usage | None = None
    duration_ms: float = 0.0
    score: float | None = None  # the evaluation of an agent node with `evaluate`
    grade: Literal["ok", "warn", "poor"] | None = None


async def execute(run: RunState, node: PlanNode, report: Callable[[asyncio.Task[NodeResult]], None]) -> NodeResult:
    """One node in its own asyncio task, which it `report`s when it ends however it ends (this
    is cheaper than a done callback: no extra turn of the event loop per node)."""
    try:
        await run.emit(NodeStartEvent(task_id=run.task.task_id, node_id=node.id, kind=node.kind))
        with node_span(run.task.task_id, node) as current:
            result = await _run_node(run, node)
            if result.status == "failed":
                mark_failed(current, result.code)
        return result
    finally:
        report(asyncio.current_task())  # type: ignore[arg-type]


async def _run_node(run: RunState, node: PlanNode) -> NodeResult:
    started = run.node_started[node.id] = time.perf_counter()
    ctx = NodeContext(run.shared, node)
    handler = HANDLERS[node.kind]
    try:
        if node.timeout_s and node.kind != "approval":  # an approval's timeout_s bounds the wait
            async with asyncio.timeout(node.timeout_s):
                output = await handler(ctx)
        else:
            output = await handler(ctx)
    except (BudgetExceeded, asyncio.CancelledError):
        raise
    except ToolApprovalNeeded as parked:  # the agent's loop is kept; the node waits for a decision
        return NodeResult(node.id, "waiting", _tool_waiting(parked), usage=ctx.usage,
                          duration_ms=(time.perf_counter() - started) * 1000)
    except CheckpointTooLarge as exc:  # an agent's loop outgrew the checkpoint (its record() drops it)
        return _failed(node, ctx, started, exc.code, f"node {node.id!r}: {exc}")
    except TimeoutError:
        return _failed(node, ctx, started, "timeout", f"node {node.id!r} timed out after {node.timeout_s:g}s")
    except NodeError as exc:
        return _failed(node, ctx, started, exc.code, exc.message)
    except TemplateProblem as exc:
        exc.node_id = exc.node_id or node.id
        return _failed(node, ctx, started, "template", str(exc))
    except LLMError as exc:
        return _failed(node, ctx, started, exc.code, f"node {node.id!r}: model call failed: {exc.message}")
    except Exception as exc:
        return _failed(node, ctx, started, "internal", f"node {node.id!r}: {type(exc).__name__}: {exc}")
    duration = (time.perf_counter() - started) * 1000
    if isinstance(output, Waiting):
        return NodeResult(node.id, "waiting", output, duration_ms=duration)
    if isinstance(output, Decision):
        return NodeResult(node.id, "decided", output, duration_ms=duration)
    evaluation = ctx.evaluation
    return NodeResult(node.id, "done", output, usage=ctx.usage, duration_ms=duration,
                      score=evaluation.score if evaluation else None, grade=evaluation.grade if evaluation else None)


def _tool_waiting(parked: ToolApprovalNeeded) -> Waiting:
    args = json.dumps(parked.arguments, ensure_ascii=False, default=str)
    return Waiting(f"Allow the tool {parked.tool} to run with {args}?", call_id=parked.call_id, tool=parked.tool,
                   args=parked.arguments)


def _failed(node: PlanNode, ctx: NodeContext, started: float, code: str, message: str) -> NodeResult:
    evaluation = ctx.evaluation
    return NodeResult(node.id, "failed", None, error=message, code=code, usage=ctx.usage,
                      duration_ms=(time.perf_counter() - started) * 1000,
                      score=evaluation.score if evaluation else None, grade=evaluation.grade if evaluation else None)


def _counted(usage: Usage | None) -> Usage | None:
    """The usage worth recording: None when the node made no model call."""
    return usage if usage is not None and (usage.total_tokens or usage.models) else None


def record(run: RunState, result: NodeResult) -> None:
    """Apply one node result to the checkpoint and to the outputs later nodes read."""
    cp = run.cp
    node = run.plan.nodes[result.node_id]
    usage = result.usage
    if usage is not None and (usage.total_tokens or usage.models):
        cp.usage = cp.usage.add(usage)
    if result.status == "waiting":
        waiting: Waiting = result.output
        cp.nodes[node.id] = NodeState(status="waiting")
        # An approval node's `timeout_s` bounds its wait; an agent's bounds its work, not a person.
        deadline = utcnow() + timedelta(seconds=node.timeout_s) if node.timeout_s and node.kind == "approval" else None
        cp.waiting[node.id] = WaitingApproval(node_id=node.id, message=waiting.message, deadline=deadline,
                                              call_id=waiting.call_id, tool=waiting.tool, args=waiting.args)
        loop = cp.agents.get(node.id)
        if loop is not None:
            loop.usage = Usage()  # counted in the task's usage just above
        return
    cp.agents.pop(node.id, None)  # the node ended: its loop is over
    if result.status == "failed":
        cp.nodes[node.id] = NodeState(status="failed", error=result.error, code=result.code,
                                      continued=node.continue_on_error)
        if node.continue_on_error:
            run.shared.outputs[node.id] = None
    else:
        output = result.output.output() if result.status == "decided" else result.output
        cp.nodes[node.id] = NodeState(status="done", output=output)
        run.shared.outputs[node.id] = output


async def flush_results(run: RunState, finished: list[NodeResult], *, checkpoint: bool = True) -> None:
    """One checkpoint write for a batch of finished nodes (`checkpoint`; deferred when they are all
    `RECOMPUTED` kinds), then their events."""
    if not finished:
        return
    if checkpoint:
        if all(run.plan.nodes[result.node_id].kind in RECOMPUTED for result in finished):
            run.unsaved = True
        else:
            await run.save()
    task_id = run.task.task_id
    for result in finished:  # inline, not a coroutine per node: this runs for every node
        node = run.plan.nodes[result.node_id]
        if result.status == "waiting":
            waiting: Waiting = result.output
            if waiting.plan is not None:
                await run.emit(PlanEvent(task_id=task_id, node_id=node.id, steps=waiting.plan))
            await run.emit(ApprovalRequestEvent(task_id=task_id, node_id=node.id, message=waiting.message,
                                                timeout_s=node.timeout_s if node.kind == "approval" else None,
                                                call_id=waiting.call_id, tool=waiting.tool, args=waiting.args))
        elif result.status == "decided":
            decision: Decision = result.output
            await run.emit(ApprovalDecisionEvent(task_id=task_id, node_id=node.id, decision=decision.decision,
                                                 by=decision.by, comment=decision.comment))
            await run.emit(NodeEndEvent(task_id=task_id, node_id=node.id, status="done", kind=node.kind,
                                        duration_ms=result.duration_ms, output_preview=decision.decision))
        elif result.status == "failed":
            await run.emit(NodeEndEvent(task_id=task_id, node_id=node.id, status="failed", kind=node.kind,
                                        duration_ms=result.duration_ms, error=result.error,
                                        usage=_counted(result.usage), score=result.score, grade=result.grade))
        else:
            await run.emit(NodeEndEvent(task_id=task_id, node_id=node.id, status="done", kind=node.kind,
                                        duration_ms=result.duration_ms, output_preview=preview(result.output),
                                        usage=_counted(result.usage), score=result.score, grade=result.grade))
