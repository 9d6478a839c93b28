"""Runs a compiled plan: the scheduler. It starts ready nodes (bounded parallelism), settles
edges as nodes finish (`frontier`: dead paths, branch routing, joins), and decides how the run
ends: done, waiting for approvals, or stopped — a node failure, a rejection, the token budget,
the task timeout, or a cancel (DSL.md "How a graph runs").

Running one node is `execute`; approvals between deliveries are `approvals`; the checkpoint,
events and the end of the run are `state.RunState`.

`run()` is idempotent over its checkpoint: finished nodes are restored, never re-run. It returns a
RunOutcome; a `waiting` outcome lists the approval nodes waiting for a decision.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping

from services.dispatcher.engine import approvals
from services.dispatcher.engine.checkpoint import Checkpoint, CheckpointTooLarge
from services.dispatcher.engine.compile import Plan
from services.dispatcher.engine.context import Deps, RunShared, TaskSpec
from services.dispatcher.engine.execute import RECOMPUTED, NodeResult, execute, flush_results, record
from services.dispatcher.engine.frontier import Frontier
from services.dispatcher.engine.outcome import Outcome, RunOutcome, Stop
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.state import RunState
from services.dispatcher.llm.api import BudgetExceeded, TokenBudget
from shared.contract.events import BudgetEvent, NodeEndEvent, NodeSkipEvent, StatusEvent
from shared.contract.task import RETRYABLE, TERMINAL

__all__ = ["Outcome", "RunOutcome", "Runner"]

Running = dict[asyncio.Task[NodeResult], str]


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
        self.cp: Checkpoint | None = None
        self.state: RunState | None = None

    @property
    def shared(self) -> RunShared:
        assert self.state is not None, "the run has not started"
        return self.state.shared

    def cancel(self, reason: str = "cancelled by user") -> None:
        self._cancel_reason = reason
        self._cancel.set()
        if self._wake is not None:
            self._wake.set()

    # -- entry --------------------------------------------------------------------------------------
    async def run(self, decisions: Mapping[str, Decision] | None = None, *, stored: Checkpoint | None = None,
                  read: bool = False) -> RunOutcome:
        """`read`: the caller has just read the task's stored checkpoint (`stored`; None when there
        is none), so it is not read again."""
        decisions = dict(decisions or {})
        loaded = stored if read else await self.deps.store.load(self.task.task_id)
        fresh = loaded is None
        cp = self.cp = self._bound(loaded if loaded is not None else self._new_checkpoint())
        if cp.task is None:  # only the record of an end (e.g. `redelivery_exhausted` before any
            cp.task = self.task.message  # checkpoint): take what a fresh one pins from this message
            cp.prompts = cp.prompts or dict(self.task.prompts)
            cp.prompt_versions = cp.prompt_versions or dict(self.task.prompt_versions)
        retrying = cp.status in RETRYABLE and self.task.retry > cp.retry
        if cp.status in TERMINAL and not retrying:
            return RunOutcome.of(cp)  # already finished (a redelivery): nothing to do
        if retrying:
            cp.nodes = {k: s for k, s in cp.nodes.items() if s.finished}
            cp.retry = self.task.retry
            cp.error = cp.code = None
        run = self.state = RunState(self.plan, self.task, self.deps, cp, self._shared(cp, decisions))
        run.shared.checkpoint = run.save  # agent loops keep their progress in the checkpoint
        if (fresh or retrying) and self.task.guardrail_grey and not cp.guardrail_passed and self.deps.guardrail:
            stopped = await self._guard(run)
            if stopped is not None:
                return stopped
        if fresh or retrying or cp.status == "waiting":
            await self._announce_running(run, fresh=fresh, retrying=retrying)
        try:
            await approvals.apply_decisions(run, decisions)
            await self._loop(run)
            if cp.waiting:
                return await run.park()
        except Stop as stop:
            return await run.finish(stop.status, error=stop.error, code=stop.code)
        except CheckpointTooLarge as exc:
            return await run.finish("failed", error=str(exc), code=exc.code)
        output = {oid: cp.nodes[oid].output for oid in self.plan.output_ids
                  if oid in cp.nodes and cp.nodes[oid].status == "done"}
        return await run.finish("done", output=output)

    async def finish_parked(self, status: Outcome, error: str, code: str) -> RunOutcome | None:
        """End a task that no runner holds (parked in `waiting`, e.g. on cancel) with a terminal
        status. Returns None when the task is not parked (unknown, running or finished)."""
        cp = await self.deps.store.load(self.task.task_id)
        if cp is None or cp.status != "waiting":
            return None
        self.cp = self._bound(cp)
        shared = RunShared(plan=self.plan, task=self.task, deps=self.deps, budget=None, outputs={},
                           prompts=cp.prompts, decisions={})
        self.state = RunState(self.plan, self.task, self.deps, cp, shared)
        return await self.state.finish(status, error=error, code=code)

    def _bound(self, cp: Checkpoint) -> Checkpoint:
        return cp.bound(getattr(self.deps, "checkpoint_limit", None))

    def _new_checkpoint(self) -> Checkpoint:
        task = self.task
        return Checkpoint(task_id=task.task_id, task=task.message, retry=task.retry, prompts=dict(task.prompts),
                          prompt_versions=dict(task.prompt_versions), chain_revision=self.deps.llm.chain_revision,
                          chain=task.chain, event_n=self.deps.events.n)

    def _shared(self, cp: Checkpoint, decisions: Mapping[str, Decision]) -> RunShared:
        budget = TokenBudget(limit=self.task.token_budget, used=cp.budget_used) if self.task.token_budget else None
        return RunShared(plan=self.plan, task=self.task, deps=self.deps, budget=budget,
                         outputs={k: s.output for k, s in cp.nodes.items() if s.finished},
                         prompts=cp.prompts, decisions=decisions, agents=cp.agents)

    async def _announce_running(self, run: RunState, *, fresh: bool, retrying: bool) -> None:
        cp = run.cp
        cp.status = "running"
        await run.emit(StatusEvent(
            task_id=self.task.task_id, status="running",
            chain_revision=cp.chain_revision if fresh else None,
            prompt_versions=(cp.prompt_versions or None) if fresh else None,
            retry=self.task.retry if retrying else None,
        ))
        if fresh:
            # Pinned from here on: stored before the first node with effects starts (a redelivery
            # before that point asks nothing of anyone again), so a redelivery after it runs with
            # the same chain and prompts the `running` event named.
            run.unsaved = True

    async def _guard(self, run: RunState) -> RunOutcome | None:
        """Tier-2 guardrail on a grey input, before anything runs: a block ends the task `failed`
        with `guardrail_blocked`; an allow is remembered, so resumes and retries skip it."""
        assert self.deps.guardrail is not None
        try:
            event, usage = await self.deps.guardrail(self.task, run.shared.budget)
        except BudgetExceeded as exc:
            await run.emit(BudgetEvent(task_id=self.task.task_id, used=exc.used, limit=exc.limit))
            return await run.finish("budget_exceeded", error=str(exc), code="budget_exceeded")
        event.task_id = self.task.task_id
        run.cp.usage = run.cp.usage.add(usage)
        await run.emit(event)
        if event.action == "block":
            return await run.finish("failed", error=f"the input was blocked by the guardrail: {event.reason}",
                                    code="guardrail_blocked")
        run.cp.guardrail_passed = True
        return None

    # -- the scheduling loop ------------------------------------------------------------------------
    async def _loop(self, run: RunState) -> None:
        frontier = Frontier(self.plan, run.cp)
        loop = asyncio.get_running_loop()
        running: Running = {}
        completed: deque[asyncio.Task[NodeResult]] = deque()
        wake = self._wake = asyncio.Event()

        def report(task: asyncio.Task[NodeResult]) -> None:
            completed.append(task)
            wake.set()

        try:
            while True:
                if frontier.skipped:
                    await self._announce_skipped(run, frontier)
                ready = frontier.ready
                while ready and len(running) < self.parallelism:
                    node = self.plan.nodes[ready.popleft()]
                    if run.unsaved and node.kind not in RECOMPUTED:
                        await run.save()  # what it must not redo is stored before it runs
                    running[loop.create_task(execute(run, node, report))] = node.id
                if not running:
                    break
                # Completion callbacks + one Event: far cheaper per node than asyncio.wait().
                if not completed and not self._cancel.is_set():
                    wake.clear()
                    timeout = self._wait_budget(run)
                    if timeout is None:
                        await wake.wait()
                    elif not await self._wait_until(run, wake, timeout, running):
                        continue  # a deadline passed, and did not stop the run
                if self._cancel.is_set():
                    await self._abort(run, running)
                    raise Stop("cancelled", self._cancel_reason, "cancelled")
                # The steps of a batch are plain calls where they can be: a coroutine costs per node.
                done = [t for t in completed if t in running]
                completed.clear()
                finished, over_budget = self._collect(run, done, running)
                if over_budget is not None:
                    await self._stop_for_budget(run, finished, running, *over_budget)
                await self._flush_or_stop(run, finished, running)
                if (stop := self._settle(run, finished, frontier)) is not None:
                    await self._abort(run, running)
                    raise stop
        finally:
            for task in running:  # only when the run itself is cancelled/crashes: never leave orphans
                task.cancel()

    async def _wait_until(self, run: RunState, wake: asyncio.Event, timeout: float, running: Running) -> bool:
        """Until a node ends or the run is cancelled (True), or a deadline passes (False)."""
        try:
            async with asyncio.timeout(timeout):
                await wake.wait()
            return True
        except TimeoutError:
            await self._on_deadline(run, running)
            return False

    def _wait_budget(self, run: RunState) -> float | None:
        """Seconds until the task deadline or the earliest approval deadline, if any."""
        limits: list[float] = []
        if self.task.timeout_s:
            limits.append(self.task.timeout_s - run.elapsed())
        if (approval := approvals.seconds_to_deadline(run)) is not None:
            limits.append(approval)
        return max(0.0, min(limits)) if limits else None

    async def _on_deadline(self, run: RunState, running: Running) -> None:
        if self.task.timeout_s and run.elapsed() >= self.task.timeout_s:
            await self._abort(run, running)
            raise Stop("timeout", f"the task exceeded its timeout of {self.task.timeout_s:g}s", "timeout")
        decision = await approvals.expire(run)
        if decision is not None:
            await self._abort(run, running)
            raise Stop("rejected", approvals.rejection(decision), "approval_timeout")

    async def _announce_skipped(self, run: RunState, frontier: Frontier) -> None:
        for node_id in frontier.skipped:
            await run.emit(NodeSkipEvent(task_id=self.task.task_id, node_id=node_id))
        frontier.skipped.clear()

    @staticmethod
    def _collect(run: RunState, done: list[asyncio.Task[NodeResult]],
                 running: Running) -> tuple[list[NodeResult], tuple[str, BudgetExceeded] | None]:
        """The results of the nodes that ended, recorded in the checkpoint; and, when a node's
        model call crossed the token budget, that node and the overrun (the nodes after it in
        `done` stay in `running`, to be stopped with the others)."""
        finished: list[NodeResult] = []
        for task in done:
            node_id = running.pop(task)
            try:
                result = task.result()
            except BudgetExceeded as exc:
                return finished, (node_id, exc)
            finished.append(result)
            record(run, result)
        return finished, None

    async def _stop_for_budget(self, run: RunState, finished: list[NodeResult], running: Running, node_id: str,
                               exc: BudgetExceeded) -> None:
        """A node's model call crossed the token budget: keep the batch, stop every other node, and
        end the run `budget_exceeded` (raises Stop)."""
        await self._flush_or_stop(run, finished, running)
        await self._abort(run, running)
        # The node whose call crossed the budget is stopped by it, like the others.
        started = run.node_started.get(node_id, time.perf_counter())
        await run.emit(NodeEndEvent(task_id=self.task.task_id, node_id=node_id, status="cancelled",
                                    kind=self.plan.nodes[node_id].kind,
                                    duration_ms=(time.perf_counter() - started) * 1000, error=str(exc)))
        await run.emit(BudgetEvent(task_id=self.task.task_id, node_id=node_id, used=exc.used, limit=exc.limit))
        raise Stop("budget_exceeded", str(exc), "budget_exceeded") from exc

    @staticmethod
    def _settle(run: RunState, finished: list[NodeResult], frontier: Frontier) -> Stop | None:
        """A failure (not `on_error: continue`) or a rejection stops the run (returned, for the
        caller to raise once it has stopped the running nodes); a finished node settles its
        out-edges."""
        for result in finished:
            state = run.cp.nodes[result.node_id]
            if state.status == "failed" and not state.continued:
                return Stop("failed", result.error, result.code)
            if state.status == "done" and result.status == "decided" and result.output.decision != "approve":
                return Stop("rejected", approvals.rejection(result.output), "rejected")
            if state.finished:
                frontier.finished(result.node_id)
        return None

    async def _flush_or_stop(self, run: RunState, finished: list[NodeResult], running: Running) -> None:
        """`flush_results`, but a checkpoint over the size limit stops the run cleanly: the batch's
        nodes end `failed` (their results cannot be kept) and the others are cancelled."""
        try:
            await flush_results(run, finished, checkpoint=self.checkpoint_every_node)
        except CheckpointTooLarge as exc:
            for result in finished:
                await run.emit(NodeEndEvent(task_id=self.task.task_id, node_id=result.node_id, status="failed",
                                            kind=self.plan.nodes[result.node_id].kind,
                                            duration_ms=result.duration_ms, error=str(exc)))
            await self._abort(run, running)
            raise Stop("failed", str(exc), exc.code) from exc

    async def _abort(self, run: RunState, running: Running) -> None:
        """Cancel every running node and wait for it to stop; each gets a `cancelled` node.end."""
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        for node_id in running.values():
            await run.emit(NodeEndEvent(task_id=self.task.task_id, node_id=node_id, status="cancelled",
                                        duration_ms=0.0, kind=self.plan.nodes[node_id].kind))
        running.clear()
