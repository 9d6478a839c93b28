"""Runs a compiled plan: dead-path elimination, branch routing, bounded parallelism, timeouts,
cancellation, approvals, budget, checkpoints and events (DSL.md "How a graph runs").

An edge is *live* when its source finished (for a branch: the edge carries the chosen handle,
else `default` when no edge carries it, else none) and *dead* when its source was skipped or the
branch chose another handle. A node runs once every incoming edge is settled and one is live;
a node whose incoming edges are all dead is skipped, and so on downstream.

`run()` is idempotent over its checkpoint: finished nodes are restored, never re-run. It returns a
RunOutcome; a `waiting` outcome lists the approval nodes waiting for a decision.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from services.dispatcher.engine.checkpoint import Checkpoint, CheckpointTooLarge, NodeState, WaitingApproval
from services.dispatcher.engine.compile import Plan, PlanNode
from services.dispatcher.engine.context import (
    CURRENT_NODE,
    Deps,
    NodeContext,
    NodeError,
    RunShared,
    TaskSpec,
    preview,
)
from services.dispatcher.engine.nodes import HANDLERS
from services.dispatcher.engine.nodes.approval import Waiting
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.spans import mark_failed, node_span
from services.dispatcher.llm.api import BudgetExceeded, LLMError, TokenBudget
from shared.contract.base import utcnow
from shared.contract.events import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    BudgetEvent,
    DoneEvent,
    EventBase,
    NodeEndEvent,
    NodeSkipEvent,
    NodeStartEvent,
    StatusEvent,
)
from shared.contract.models import Usage
from shared.contract.task import TERMINAL
from shared.contract.templates import TemplateProblem

Outcome = Literal["done", "waiting", "failed", "timeout", "rejected", "cancelled", "budget_exceeded"]
RETRYABLE = frozenset({"failed", "timeout"})


@dataclass
class RunOutcome:
    status: Outcome
    output: dict[str, Any] | None = None
    error: str | None = None
    code: str | None = None
    waiting: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    checkpoint: Checkpoint | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass
class _Result:
    node_id: str
    status: Literal["done", "failed", "waiting", "decided"]
    output: Any = None
    error: str | None = None
    code: str | None = None
    usage: Usage | None = None
    duration_ms: float = 0.0
    score: float | None = None  # the evaluation of an agent node with `evaluate`
    grade: Literal["ok", "warn", "poor"] | None = None


class _Stop(Exception):
    """Ends the run with a terminal status (failure, rejection, budget, timeout, cancel)."""

    def __init__(self, status: Outcome, error: str | None, code: str | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.code = code


class Runner:
    def __init__(self, plan: Plan, task: TaskSpec, deps: Deps, *, parallelism: int = 8,
                 checkpoint_every_node: bool = True) -> None:
        self.plan = plan
        self.task = task
        self.deps = deps
        self.parallelism = max(1, parallelism)
        self.checkpoint_every_node = checkpoint_every_node
        self._cancel = asyncio.Event()
        self._wake: asyncio.Event | None = None
        self._cancel_reason = "cancelled"
        self._node_started: dict[str, float] = {}
        self.cp: Checkpoint | None = None

    def cancel(self, reason: str = "cancelled by user") -> None:
        self._cancel_reason = reason
        self._cancel.set()
        if self._wake is not None:
            self._wake.set()

    # -- entry --------------------------------------------------------------------------------------
    async def run(self, decisions: Mapping[str, Decision] | None = None) -> RunOutcome:
        decisions = dict(decisions or {})
        cp = await self.deps.store.load(self.task.task_id)
        fresh = cp is None
        if cp is None:
            cp = Checkpoint(task_id=self.task.task_id, task=self.task.message, retry=self.task.retry,
                            prompts=dict(self.task.prompts),
                            prompt_versions=dict(self.task.prompt_versions),
                            chain_revision=self.deps.llm.chain_revision, chain=self.task.chain,
                            event_n=self.deps.events.n)
        self.cp = cp.bound(getattr(self.deps, "checkpoint_limit", None))
        if cp.task is None:  # only the record of an end (e.g. `redelivery_exhausted` before any
            cp.task = self.task.message  # checkpoint): take what a fresh one pins from this message
            cp.prompts = cp.prompts or dict(self.task.prompts)
            cp.prompt_versions = cp.prompt_versions or dict(self.task.prompt_versions)
        retrying = cp.status in RETRYABLE and self.task.retry > cp.retry
        if cp.status in TERMINAL and not retrying:
            return self._outcome()  # already finished (a redelivery): nothing to do
        self._run_started = time.monotonic()
        self._elapsed_before = cp.elapsed_s
        if retrying:
            self._reset_for_retry()
        budget = None
        if self.task.token_budget:
            budget = TokenBudget(limit=self.task.token_budget, used=cp.budget_used)
        self.shared = RunShared(plan=self.plan, task=self.task, deps=self.deps, budget=budget,
                                outputs={k: s.output for k, s in cp.nodes.items() if s.finished},
                                prompts=cp.prompts, decisions=decisions)
        if (fresh or retrying) and self.task.guardrail_grey and not cp.guardrail_passed and self.deps.guardrail:
            stopped = await self._guard()
            if stopped is not None:
                return stopped
        if fresh or retrying or cp.status == "waiting":
            cp.status = "running"
            await self._emit(StatusEvent(
                task_id=self.task.task_id, status="running",
                chain_revision=cp.chain_revision if fresh else None,
                prompt_versions=(cp.prompt_versions or None) if fresh else None,
                retry=self.task.retry if retrying else None,
            ))
            if fresh:
                # Pinned from here on: a redelivery before the first node ends finds this
                # checkpoint and runs with the same chain and prompts the `running` event named.
                await self._save()
        try:
            await self._apply_decisions(decisions)
            await self._loop()
            if cp.waiting:
                return await self._park()
        except _Stop as stop:
            return await self._finish(stop.status, error=stop.error, code=stop.code)
        except CheckpointTooLarge as exc:
            return await self._finish("failed", error=str(exc), code="checkpoint_too_large")
        output = {oid: cp.nodes[oid].output for oid in self.plan.output_ids
                  if oid in cp.nodes and cp.nodes[oid].status == "done"}
        return await self._finish("done", output=output)

    async def _guard(self) -> RunOutcome | None:
        """Tier-2 guardrail on a grey input, before anything runs: a block ends the task `failed`
        with `guardrail_blocked`; an allow is remembered, so resumes and retries skip it."""
        cp = self.cp
        assert cp is not None and self.deps.guardrail is not None
        budget = self.shared.budget
        try:
            event, usage = await self.deps.guardrail(self.task, budget)
        except BudgetExceeded as exc:
            await self._emit(BudgetEvent(task_id=self.task.task_id, used=exc.used, limit=exc.limit))
            return await self._finish("budget_exceeded", error=str(exc), code="budget_exceeded")
        event.task_id = self.task.task_id
        cp.usage = cp.usage.add(usage)
        await self._emit(event)
        if event.action == "block":
            return await self._finish("failed", error=f"the input was blocked by the guardrail: {event.reason}",
                                      code="guardrail_blocked")
        cp.guardrail_passed = True
        return None

    async def _park(self) -> RunOutcome:
        cp = self.cp
        assert cp is not None
        cp.status = "waiting"
        await self._emit(StatusEvent(task_id=self.task.task_id, status="waiting"))
        await self._flush_events()
        await self._save()
        await self._flush_store()
        return self._outcome()

    async def finish_parked(self, status: Outcome, error: str, code: str) -> RunOutcome | None:
        """End a task that no runner holds (parked in `waiting`, e.g. on cancel) with a terminal
        status. Returns None when the task is not parked (unknown, running or finished)."""
        cp = await self.deps.store.load(self.task.task_id)
        if cp is None or cp.status != "waiting":
            return None
        self.cp = cp.bound(getattr(self.deps, "checkpoint_limit", None))
        self._run_started = time.monotonic()
        self._elapsed_before = cp.elapsed_s
        self.shared = RunShared(plan=self.plan, task=self.task, deps=self.deps, budget=None, outputs={},
                                prompts=cp.prompts, decisions={})
        return await self._finish(status, error=error, code=code)

    def _reset_for_retry(self) -> None:
        cp = self.cp
        assert cp is not None
        cp.nodes = {k: s for k, s in cp.nodes.items() if s.finished}
        cp.retry = self.task.retry
        cp.error = cp.code = None

    # -- approvals ----------------------------------------------------------------------------------
    async def _apply_decisions(self, decisions: dict[str, Decision]) -> None:
        cp = self.cp
        assert cp is not None
        now = utcnow()
        for node_id, waiting in cp.waiting.items():
            if node_id not in decisions and waiting.deadline is not None and waiting.deadline <= now:
                decisions[node_id] = Decision(node_id, "timeout", by="system", comment="approval timed out")
        rejected: list[Decision] = []
        for node_id in list(cp.waiting):
            decision = decisions.get(node_id)
            if decision is None:
                continue
            if await self._decided(node_id, decision):
                rejected.append(decision)
        if cp.waiting or rejected:
            await self._save()
        if rejected:
            first = rejected[0]
            raise _Stop("rejected", _rejection(first), "approval_timeout" if first.decision == "timeout" else
                        "rejected")

    async def _decided(self, node_id: str, decision: Decision) -> bool:
        """Records a decision for a waiting node; True when it rejects the task."""
        cp = self.cp
        assert cp is not None
        cp.waiting.pop(node_id, None)
        await self._emit(ApprovalDecisionEvent(task_id=self.task.task_id, node_id=node_id,
                                               decision=decision.decision, by=decision.by,
                                               comment=decision.comment))
        cp.nodes[node_id] = NodeState(status="done", output=decision.output())
        self.shared.outputs[node_id] = decision.output()
        await self._emit(NodeEndEvent(task_id=self.task.task_id, node_id=node_id, status="done", duration_ms=0.0,
                                      kind="approval", output_preview=decision.decision))
        return decision.decision != "approve"

    # -- the scheduling loop ------------------------------------------------------------------------
    def _edge_live(self, source: PlanNode, handle: str | None) -> bool:
        state = self.cp.nodes[source.id]  # type: ignore[union-attr]
        if state.status == "skipped":
            return False
        if source.handles is None:
            return True
        chosen = state.output if isinstance(state.output, str) else None
        if chosen is not None and chosen in source.out_handles:
            return handle == chosen
        return handle == "default"

    async def _loop(self) -> None:
        cp = self.cp
        assert cp is not None
        nodes = self.plan.nodes
        settled: dict[str, int] = {}
        live: dict[str, int] = {}
        ready: deque[str] = deque()
        to_check: deque[str] = deque()
        for node_id in self.plan.order:
            if cp.finished(node_id) or node_id in cp.waiting:
                continue
            pn = nodes[node_id]
            settled[node_id] = live[node_id] = 0
            for edge in pn.in_edges:
                if cp.finished(edge.source):
                    settled[node_id] += 1
                    live[node_id] += self._edge_live(nodes[edge.source], edge.handle)
            to_check.append(node_id)

        skipped_now: list[str] = []

        def check(node_id: str) -> None:
            pn = nodes[node_id]
            if settled[node_id] < len(pn.in_edges):
                return
            if live[node_id] or not pn.in_edges:
                ready.append(node_id)
            else:
                cp.nodes[node_id] = NodeState(status="skipped")
                skipped_now.append(node_id)
                settle_successors(node_id)

        def settle_successors(node_id: str) -> None:
            pn = nodes[node_id]
            for edge in pn.out_edges:
                target = edge.target
                if target not in settled:
                    continue
                settled[target] += 1
                live[target] += self._edge_live(pn, edge.handle)
                check(target)

        for node_id in to_check:
            check(node_id)
        loop = asyncio.get_running_loop()
        running: dict[asyncio.Task[_Result], str] = {}
        completed: deque[asyncio.Task[_Result]] = deque()
        wake = self._wake = asyncio.Event()

        def report(task: asyncio.Task[_Result]) -> None:
            completed.append(task)
            wake.set()

        try:
            while True:
                if skipped_now:
                    for node_id in skipped_now:
                        await self._emit(NodeSkipEvent(task_id=self.task.task_id, node_id=node_id))
                    skipped_now.clear()
                while ready and len(running) < self.parallelism:
                    node_id = ready.popleft()
                    task = loop.create_task(self._execute(nodes[node_id], report))
                    running[task] = node_id
                if not running:
                    break
                # Completion callbacks + one Event: far cheaper per node than asyncio.wait().
                if not completed and not self._cancel.is_set():
                    wake.clear()
                    timeout = self._wait_budget()
                    if timeout is None:
                        await wake.wait()
                    else:
                        try:
                            async with asyncio.timeout(timeout):
                                await wake.wait()
                        except TimeoutError:
                            await self._on_deadline(running)
                            continue
                if self._cancel.is_set():
                    await self._abort(running)
                    raise _Stop("cancelled", self._cancel_reason, "cancelled")
                done = [t for t in completed if t in running]
                completed.clear()
                finished: list[_Result] = []
                try:
                    for task in done:
                        node_id = running.pop(task)  # type: ignore[arg-type]
                        result = task.result()
                        finished.append(result)
                        self._record(result)
                except BudgetExceeded as exc:
                    await self._flush_or_stop(finished, running)
                    await self._abort(running)
                    # The node whose call crossed the budget is stopped by it, like the others.
                    await self._emit(NodeEndEvent(
                        task_id=self.task.task_id, node_id=node_id, status="cancelled", kind=nodes[node_id].kind,
                        duration_ms=(time.perf_counter() - self._node_started.get(node_id, time.perf_counter()))
                        * 1000, error=str(exc)))
                    await self._emit(BudgetEvent(task_id=self.task.task_id, node_id=node_id, used=exc.used,
                                                 limit=exc.limit))
                    raise _Stop("budget_exceeded", str(exc), "budget_exceeded") from exc
                await self._flush_or_stop(finished, running)
                for result in finished:
                    state = cp.nodes[result.node_id]
                    if state.status == "failed" and not state.continued:
                        await self._abort(running)
                        raise _Stop("failed", result.error, result.code)
                    if state.status == "done" and result.status == "decided" and \
                            result.output.decision != "approve":
                        await self._abort(running)
                        raise _Stop("rejected", _rejection(result.output), "rejected")
                    if state.finished:
                        settle_successors(result.node_id)
        finally:
            for task in running:  # only when the run itself is cancelled/crashes: never leave orphans
                task.cancel()

    def _wait_budget(self) -> float | None:
        """Seconds until the task deadline or the earliest approval deadline, if any."""
        cp = self.cp
        assert cp is not None
        limits: list[float] = []
        if self.task.timeout_s:
            limits.append(self.task.timeout_s - self._elapsed())
        for waiting in cp.waiting.values():
            if waiting.deadline is not None:
                limits.append((waiting.deadline - utcnow()).total_seconds())
        return max(0.0, min(limits)) if limits else None

    async def _on_deadline(self, running: dict[asyncio.Task[_Result], str]) -> None:
        cp = self.cp
        assert cp is not None
        if self.task.timeout_s and self._elapsed() >= self.task.timeout_s:
            await self._abort(running)
            raise _Stop("timeout", f"the task exceeded its timeout of {self.task.timeout_s:g}s", "timeout")
        now = utcnow()
        expired = [w for w in cp.waiting.values() if w.deadline is not None and w.deadline <= now]
        if expired:
            decision = Decision(expired[0].node_id, "timeout", by="system", comment="approval timed out")
            await self._decided(expired[0].node_id, decision)
            await self._abort(running)
            raise _Stop("rejected", _rejection(decision), "approval_timeout")

    def _record(self, result: _Result) -> None:
        """Apply one node result to the checkpoint (BudgetExceeded is raised by `task.result()`)."""
        cp = self.cp
        assert cp is not None
        node = self.plan.nodes[result.node_id]
        if result.usage is not None and (result.usage.total_tokens or result.usage.models):
            cp.usage = cp.usage.add(result.usage)
        if result.status == "waiting":
            cp.nodes[node.id] = NodeState(status="waiting")
            deadline = utcnow() + timedelta(seconds=node.timeout_s) if node.timeout_s else None
            cp.waiting[node.id] = WaitingApproval(node_id=node.id, message=result.output.message, deadline=deadline)
        elif result.status == "failed":
            cp.nodes[node.id] = NodeState(status="failed", error=result.error, code=result.code,
                                          continued=node.continue_on_error)
            if node.continue_on_error:
                self.shared.outputs[node.id] = None
        else:
            output = result.output.output() if result.status == "decided" else result.output
            cp.nodes[node.id] = NodeState(status="done", output=output)
            self.shared.outputs[node.id] = output

    async def _flush_results(self, finished: list[_Result]) -> None:
        """One checkpoint write for a batch of finished nodes, then their events."""
        if not finished:
            return
        if self.checkpoint_every_node:
            await self._save()
        task_id = self.task.task_id
        for result in finished:
            node = self.plan.nodes[result.node_id]
            usage = result.usage if result.usage and (result.usage.total_tokens or result.usage.models) else None
            if result.status == "waiting":
                await self._emit(ApprovalRequestEvent(task_id=task_id, node_id=node.id,
                                                      message=result.output.message, timeout_s=node.timeout_s))
            elif result.status == "decided":
                decision: Decision = result.output
                await self._emit(ApprovalDecisionEvent(task_id=task_id, node_id=node.id,
                                                       decision=decision.decision, by=decision.by,
                                                       comment=decision.comment))
                await self._emit(NodeEndEvent(task_id=task_id, node_id=node.id, status="done", kind=node.kind,
                                              duration_ms=result.duration_ms,
                                              output_preview=decision.decision))
            elif result.status == "failed":
                await self._emit(NodeEndEvent(task_id=task_id, node_id=node.id, status="failed", kind=node.kind,
                                              duration_ms=result.duration_ms, error=result.error, usage=usage,
                                              score=result.score, grade=result.grade))
            else:
                await self._emit(NodeEndEvent(
                    task_id=task_id, node_id=node.id, status="done", kind=node.kind, duration_ms=result.duration_ms,
                    output_preview=preview(result.output), usage=usage, score=result.score, grade=result.grade))

    async def _flush_or_stop(self, finished: list[_Result], running: dict[asyncio.Task[_Result], str]) -> None:
        """`_flush_results`, but a checkpoint over the size limit stops the run cleanly: the batch's
        nodes end `failed` (their results cannot be kept) and the others are cancelled."""
        try:
            await self._flush_results(finished)
        except CheckpointTooLarge as exc:
            for result in finished:
                await self._emit(NodeEndEvent(task_id=self.task.task_id, node_id=result.node_id, status="failed",
                                              kind=self.plan.nodes[result.node_id].kind,
                                              duration_ms=result.duration_ms, error=str(exc)))
            await self._abort(running)
            raise _Stop("failed", str(exc), "checkpoint_too_large") from exc

    async def _abort(self, running: dict[asyncio.Task[_Result], str]) -> None:
        """Cancel every running node and wait for it to stop; each gets a `cancelled` node.end."""
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        for node_id in running.values():
            await self._emit(NodeEndEvent(task_id=self.task.task_id, node_id=node_id, status="cancelled",
                                          duration_ms=0.0, kind=self.plan.nodes[node_id].kind))
        running.clear()

    # -- one node -----------------------------------------------------------------------------------
    async def _execute(self, node: PlanNode, report: Callable[[asyncio.Task[_Result]], None]) -> _Result:
        """One node in its own asyncio task, which it `report`s when it ends however it ends (this
        is cheaper than a done callback: no extra turn of the event loop per node)."""
        try:
            CURRENT_NODE.set(node.id)  # this node's own asyncio task: the value ends with it
            await self._emit(NodeStartEvent(task_id=self.task.task_id, node_id=node.id, kind=node.kind))
            with node_span(self.task.task_id, node) as current:
                result = await self._run_node(node)
                if result.status == "failed":
                    mark_failed(current, result.code)
            return result
        finally:
            report(asyncio.current_task())  # type: ignore[arg-type]

    async def _run_node(self, node: PlanNode) -> _Result:
        started = self._node_started[node.id] = time.perf_counter()
        ctx = NodeContext(self.shared, node)
        handler = HANDLERS[node.kind]
        try:
            if node.timeout_s and node.kind != "approval":  # an approval's timeout_s bounds the wait
                async with asyncio.timeout(node.timeout_s):
                    output = await handler(ctx)
            else:
                output = await handler(ctx)
        except (BudgetExceeded, asyncio.CancelledError):
            raise
        except TimeoutError:
            return self._failed(node, ctx, started, "timeout", f"node {node.id!r} timed out after {node.timeout_s:g}s")
        except NodeError as exc:
            return self._failed(node, ctx, started, exc.code, exc.message)
        except TemplateProblem as exc:
            exc.node_id = exc.node_id or node.id
            return self._failed(node, ctx, started, "template", str(exc))
        except LLMError as exc:
            return self._failed(node, ctx, started, exc.code, f"node {node.id!r}: model call failed: {exc.message}")
        except Exception as exc:
            return self._failed(node, ctx, started, "internal", f"node {node.id!r}: {type(exc).__name__}: {exc}")
        duration = (time.perf_counter() - started) * 1000
        if isinstance(output, Waiting):
            return _Result(node.id, "waiting", output, duration_ms=duration)
        if isinstance(output, Decision):
            return _Result(node.id, "decided", output, duration_ms=duration)
        evaluation = ctx.evaluation
        return _Result(node.id, "done", output, usage=ctx.usage, duration_ms=duration,
                       score=evaluation.score if evaluation else None, grade=evaluation.grade if evaluation else None)

    @staticmethod
    def _failed(node: PlanNode, ctx: NodeContext, started: float, code: str, message: str) -> _Result:
        evaluation = ctx.evaluation
        return _Result(node.id, "failed", None, error=message, code=code, usage=ctx.usage,
                       duration_ms=(time.perf_counter() - started) * 1000,
                       score=evaluation.score if evaluation else None, grade=evaluation.grade if evaluation else None)

    # -- bookkeeping --------------------------------------------------------------------------------
    def _elapsed(self) -> float:
        return self._elapsed_before + (time.monotonic() - self._run_started)

    async def _emit(self, event: EventBase) -> None:
        await self.deps.events.emit(event)

    async def _save(self) -> None:
        cp = self.cp
        assert cp is not None
        cp.elapsed_s = self._elapsed()
        cp.event_n = self.deps.events.n
        if self.shared.budget is not None:
            cp.budget_used = self.shared.budget.used
        cp.updated_at = utcnow()
        await self.deps.store.save(cp)

    async def _finish(self, status: Outcome, *, output: dict[str, Any] | None = None, error: str | None = None,
                      code: str | None = None) -> RunOutcome:
        """Terminal state: events first, then the checkpoint. A crash in between re-runs the end
        (a repeated `done` is harmless); the reverse order could lose the `done` event."""
        cp = self.cp
        assert cp is not None
        cp.status, cp.output, cp.error, cp.code = status, output, error, code
        cp.waiting = {}
        task_id = self.task.task_id
        await self._emit(StatusEvent(task_id=task_id, status=status, error=error, code=code))
        await self._emit(DoneEvent(task_id=task_id, status=status, output=output, error=error, usage=cp.usage))
        await self._flush_events()
        try:
            await self._save()
        except CheckpointTooLarge:
            # The end must be kept: without the node outputs (a retry re-runs every node) …
            cp.nodes = {}
            try:
                await self._save()
            except CheckpointTooLarge:  # … or not at all (the events hold the record)
                await self.deps.store.delete(task_id)
        await self._flush_store()
        return self._outcome()

    async def _flush_events(self) -> None:
        flush = getattr(self.deps.events, "flush", None)
        if flush is not None:
            await flush()

    async def _flush_store(self) -> None:
        """Pipelined stores (KV) confirm every write here, before the task message is acked."""
        flush = getattr(self.deps.store, "flush", None)
        if flush is not None:
            await flush()

    def _outcome(self) -> RunOutcome:
        cp = self.cp
        assert cp is not None
        return RunOutcome(status=cp.status, output=cp.output, error=cp.error, code=cp.code,  # type: ignore[arg-type]
                          waiting=sorted(cp.waiting), usage=cp.usage, checkpoint=cp)


def _rejection(decision: Decision) -> str:
    if decision.decision == "timeout":
        return f"approval {decision.node_id!r} timed out"
    return f"approval {decision.node_id!r} rejected by {decision.by}" + (
        f": {decision.comment}" if decision.comment else "")
