"""The bookkeeping of one run that the scheduler, node execution and approvals share: the live
checkpoint and its writes, the event sink, elapsed time, and the end of the run."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from services.dispatcher.engine.checkpoint import Checkpoint, CheckpointTooLarge
from services.dispatcher.engine.compile import Plan
from services.dispatcher.engine.context import Deps, RunShared, TaskSpec
from services.dispatcher.engine.outcome import Outcome, RunOutcome
from shared.contract.base import utcnow
from shared.contract.events import EventBase, StatusEvent, finish_task


class RunState:
    def __init__(self, plan: Plan, task: TaskSpec, deps: Deps, cp: Checkpoint, shared: RunShared) -> None:
        self.plan = plan
        self.task = task
        self.deps = deps
        self.cp = cp
        self.shared = shared
        self.elapsed_before = cp.elapsed_s
        self.started = time.monotonic()
        self.node_started: dict[str, float] = {}  # perf_counter when each node began
        # The checkpoint in memory is ahead of the stored one by what a redelivery can redo at no
        # cost and with the same result (`execute.RECOMPUTED`: the start of a fresh run, nodes
        # that only read the input and earlier outputs): stored before the next node with effects
        # starts, or with the end of the run.
        self.unsaved = False
        # The sink's own method, not a wrapper: several events per node, each a coroutine less.
        self.emit: Callable[[EventBase], Awaitable[Any]] = deps.events.emit

    def elapsed(self) -> float:
        """Seconds the task has run, over every delivery (a timeout counts them all)."""
        return self.elapsed_before + (time.monotonic() - self.started)

    async def save(self) -> None:
        cp = self.cp
        cp.elapsed_s = self.elapsed()
        cp.event_n = self.deps.events.n
        if self.shared.budget is not None:
            cp.budget_used = self.shared.budget.used
        cp.updated_at = utcnow()
        await self.deps.store.save(cp)
        self.unsaved = False

    async def flush_events(self) -> None:
        flush = getattr(self.deps.events, "flush", None)
        if flush is not None:
            await flush()

    async def flush_store(self) -> None:
        """Pipelined stores (KV) confirm every write here, before the task message is acked."""
        flush = getattr(self.deps.store, "flush", None)
        if flush is not None:
            await flush()

    def outcome(self) -> RunOutcome:
        return RunOutcome.of(self.cp)

    async def park(self) -> RunOutcome:
        """Approvals wait for a decision: the task is `waiting` until a resume message comes."""
        self.cp.status = "waiting"
        # The usage so far travels with `waiting`: a parked task's record shows what it spent.
        await self.emit(StatusEvent(task_id=self.task.task_id, status="waiting", usage=self.cp.usage))
        await self.flush_events()
        await self.save()
        await self.flush_store()
        return self.outcome()

    async def finish(self, status: Outcome, *, output: dict[str, Any] | None = None, error: str | None = None,
                     code: str | None = None) -> RunOutcome:
        """Terminal state: events first, then the checkpoint. A crash in between re-runs the end
        (a repeated `done` is harmless); the reverse order could lose the `done` event."""
        cp = self.cp
        cp.status, cp.output, cp.error, cp.code = status, output, error, code
        cp.waiting = {}
        await self.announce_end(status, output=output, error=error, code=code)
        try:
            await self.save()
        except CheckpointTooLarge:
            # The end must be kept: without the node outputs (a retry re-runs every node) …
            cp.nodes = {}
            try:
                await self.save()
            except CheckpointTooLarge:  # … or not at all (the events hold the record)
                await self.deps.store.delete(self.task.task_id)
        await self.flush_store()
        return self.outcome()

    async def announce_end(self, status: Outcome, *, output: dict[str, Any] | None, error: str | None,
                           code: str | None) -> None:
        """The terminal events of the task: `status`, `done`, then a flush of the sink."""
        await finish_task(self.deps.events, self.task.task_id, status, output=output, error=error, code=code,
                          usage=self.cp.usage, retry=self.task.retry)
