"""The dispatcher's task worker: what a task or resume message means. The queue mechanics —
pulling from the durable `dispatcher` consumer with bounded concurrency, keeping each message's
lease alive while its graph runs, bounded deliveries and drain — are `shared.bus.workqueue`'s.
Runs checkpoint to KV and emit events; a message is acked only at a terminal state or when the
task is parked.

- Redelivery (a dispatcher died) resumes from the checkpoint; a finished task is acked at once.
- Cancel (`P.tasks.cancel.<id>`): every dispatcher running the task stops it; one dispatcher (a
  queue group) ends a parked task.
- Approval timeouts: parking publishes a `timeout` resume per approval with a deadline; a resume
  that arrives before its deadline is nak'ed with the remaining delay (durable, crash-proof).
- `max_deliver` exhausted: the task is recorded `failed` with code `redelivery_exhausted` (status
  and done events) and the message removed — as soon as its last delivery crashes, else on the
  MAX_DELIVERIES advisory (its dispatchers died), which the dead-letter stream keeps until a
  live dispatcher has recorded it (both through `_on_max_deliveries`).
- Tracing: each message is handled in a span parented to the sender's context (the gateway's
  HTTP request); nodes, model calls and tool calls are child spans.
- `drain()` (SIGTERM): stop pulling, let in-flight work finish within a grace period, then stop
  the rest and nak their messages so another replica takes them over at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.dispatcher.checkpoints_kv import KVCheckpointStore
from services.dispatcher.engine.checkpoint import Checkpoint
from services.dispatcher.engine.compile import CompileError, compile_plan
from services.dispatcher.engine.context import Deps, Guard, TaskSpec
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.react import ReactAgent
from services.dispatcher.engine.runner import Runner, RunOutcome
from services.dispatcher.engine.streamed import already_streamed
from services.dispatcher.harness.evaluate import Evaluator
from services.dispatcher.harness.guardrail import classify_input, input_text
from services.dispatcher.harness.redact_events import RedactingEvents
from services.dispatcher.llm.api import LLM, TokenBudget
from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.standby import StandBy
from shared.bus import Bus
from shared.bus.delivery import Ack, Delivery, Nak, Term, Verdict
from shared.bus.events import EventPublisher, last_event, last_event_n, read_events
from shared.bus.tools import CachedListing, ToolClient, ToolListing
from shared.bus.tracing import consumer_span
from shared.bus.workqueue import WorkQueue
from shared.contract.base import utcnow
from shared.contract.events import GuardrailEvent, finish_task
from shared.contract.models import ModelChain, Usage
from shared.contract.task import RETRYABLE, TERMINAL, CancelMessage, ResumeMessage, TaskMessage
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply
from shared.telemetry import span

log = logging.getLogger("agentix.dispatcher.worker")
# How long a task naming tools of a tool service that did not answer waits before its next try.
TOOLS_BACK_WAIT_S = 2.0


@dataclass
class _Job:
    task_id: str
    runner: Runner | None = None


class CachedTools:
    """The ToolCaller for runs: ToolClient with the registry cached for a few seconds."""

    def __init__(self, client: ToolClient) -> None:
        self.client = client
        # A listing without a service is kept for less than a waiting task's retry delay, so the
        # retry asks again, and tasks in between do not each wait out the silent service's timeout.
        self._listing = CachedListing(client, incomplete_ttl_s=TOOLS_BACK_WAIT_S / 2)

    async def list_tools(self) -> list[ToolDescriptor]:
        return (await self.listing()).tools

    async def listing(self) -> ToolListing:
        """The registry, cached for a few seconds (`CachedListing`)."""
        return await self._listing.get()

    async def call(self, tool: str, args: dict[str, Any], meta: ToolMeta | None, *,
                   timeout_s: float | None = None) -> ToolReply:
        # Every tool call of a run (tool nodes, retrievers, ReAct steps) passes here; the request
        # carries this span's traceparent and the tool service continues the trace.
        attributes = {"messaging.system": "nats", "agentix.tool": tool}
        if meta is not None:
            attributes.update({"agentix.task_id": meta.task_id or "", "agentix.node_id": meta.node_id or ""})
        with span(f"tool.call {tool}", attributes, SpanKind.CLIENT) as current:
            reply = await self.client.call(tool, args, meta, timeout_s=timeout_s)
            if not reply.ok:
                current.set_status(Status(StatusCode.ERROR, reply.error.code if reply.error else "error"))
            return reply


class Worker:
    def __init__(self, bus: Bus, pool: ModelPool, *, concurrency: int | None = None) -> None:
        self.bus = bus
        self.settings = pool.settings  # the dispatcher's own settings (the bus holds only the common ones)
        self.pool = pool
        # Held runs mostly wait on a model or a tool: as many as the setting allows, one task
        # message each (the consumer's max_ack_pending bounds all dispatchers together).
        self.concurrency = concurrency or self.settings.dispatcher_max_runs
        self.tools = CachedTools(ToolClient(bus))
        self.agent = ReactAgent(tool_timeout_s=self.settings.tool_timeout_s)
        self.evaluator = Evaluator()
        self.jobs: dict[str, _Job] = {}
        self._subs: list[Any] = []
        self.store: KVCheckpointStore | None = None
        n = bus.names
        self.queue = WorkQueue(
            bus, n.tasks_stream, n.dispatcher_consumer, handle=self._handle, on_exhausted=self._on_max_deliveries,
            concurrency=self.concurrency, capacity=self.concurrency,  # one message per running task
            ack_wait_s=self.settings.task_ack_wait_s, max_deliver=self.settings.task_max_deliver,
        )
        self.standby = StandBy(bus, lambda task_id: task_id in self.jobs, lease_s=self.queue.ack_wait_s)

    @property
    def inflight(self) -> int:
        return self.queue.running

    @property
    def done(self) -> int:
        return self.queue.handled

    @property
    def pulling(self) -> bool:
        """The pull loop is alive (False before `start`, after `drain`, or when it died)."""
        return self.queue.pulling

    # -- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        kv = await self.bus.js.key_value(self.bus.names.checkpoints_bucket)
        self.store = KVCheckpointStore(kv)
        s = self.bus.subjects
        nc = self.bus.nc
        self._subs.append(await nc.subscribe(s.cancel_all, cb=self._on_cancel))
        self._subs.append(await nc.subscribe(s.cancel_all, queue="dispatcher-parked", cb=self._on_cancel_parked))
        await self.queue.start()

    async def drain(self, grace_s: float = 30.0) -> None:
        """Stop taking work; finish in-flight tasks within `grace_s`, then hand the rest back."""
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        await self.queue.drain(grace_s)
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.flush()

    async def _handle(self, delivery: Delivery) -> Verdict | None:
        resume = delivery.subject == self.bus.subjects.tasks_resume
        operation = "tasks.resume" if resume else "tasks.submit"
        with consumer_span(f"dispatch {operation}", delivery.headers, **{"messaging.destination.name": operation}):
            if resume:
                return await self._handle_resume(delivery)
            return await self._handle_submit(delivery)

    # -- submit -------------------------------------------------------------------------------------
    async def _handle_submit(self, delivery: Delivery) -> Verdict | None:
        try:
            task = TaskMessage.from_bytes(delivery.data)
        except ValueError as exc:
            log.error("dropping a task message that does not parse: %s", exc)
            return Term()
        _annotate(task.task_id)
        return await self._run(task, delivery, decisions=None)

    async def _handle_resume(self, delivery: Delivery) -> Verdict | None:
        try:
            resume = ResumeMessage.from_bytes(delivery.data)
        except ValueError as exc:
            log.error("dropping a resume message that does not parse: %s", exc)
            return Term()
        assert self.store is not None
        _annotate(resume.task_id, resume.node_id)
        cp = await self.store.load(resume.task_id)
        waiting = cp.waiting.get(resume.node_id) if cp else None
        if cp is None or cp.task is None or cp.status in TERMINAL:
            return Ack()  # stale or repeated: the task ended
        if waiting is None:
            if delivery.attempt > 1 and cp.status == "running":
                # Redelivered: the dispatcher that took this decision may have died while the task
                # ran on from it (a parked task's own message is acked). Run it from its checkpoint;
                # `_run` stands by while that dispatcher still runs it.
                return await self._run(TaskMessage.model_validate(cp.task), delivery, decisions=None, cp=cp)
            return Ack()  # repeated: the task moved on
        if resume.decision == "timeout" and waiting.deadline is not None:
            left = (waiting.deadline - utcnow()).total_seconds()
            if left > 0.05:
                return Nak(delay=left)  # the approval's timer: come back at the deadline
        if cp.status != "waiting":
            if resume.decision == "timeout":
                return Ack()  # a running task enforces its approval deadlines itself
            return Nak(delay=1.0)  # another dispatcher is still finishing the parallel branches
        decision = Decision(resume.node_id, resume.decision, by=resume.by, comment=resume.comment, args=resume.args)
        return await self._run(TaskMessage.model_validate(cp.task), delivery, decisions={resume.node_id: decision},
                               cp=cp)

    # -- running ------------------------------------------------------------------------------------
    async def _run(self, task: TaskMessage, delivery: Delivery, decisions: dict[str, Decision] | None,
                   cp: Checkpoint | None = None) -> Verdict | None:
        assert self.store is not None
        if delivery.attempt > 1:
            other_run = await self.standby.other_run(task.task_id, delivery)
            if other_run == "answered":
                return Ack()  # the run that held it before has ended and answered the message
            if other_run == "died":
                cp = None  # read what that run checkpointed while this one waited
        if cp is None:
            cp = await self.store.load(task.task_id)
        if cp is None and delivery.attempt > 1 and await _ended(self.bus, task.task_id):
            # Its run ended (and dropped the checkpoint) but the ack did not get through: running
            # it again would start it from scratch.
            await delivery.settle(Ack(sync=True))
            return None
        if cp is not None and cp.status in TERMINAL and not (cp.status in RETRYABLE and task.retry > cp.retry):
            await self._ack_final(delivery, task.task_id, cp.status)  # redelivered after it ended
            return None
        start_n = max(cp.event_n if cp else 0, await last_event_n(self.bus, task.task_id))
        # A takeover: what the nodes that were running have already streamed is not streamed again.
        streamed = already_streamed([e async for _, e in read_events(self.bus, task.task_id, follow=False)]
                                    ) if start_n else {}
        events = RedactingEvents(EventPublisher(self.bus, task.task_id, start_n=start_n), self.pool.redactor)
        listing = await self.tools.listing()
        try:
            plan = compile_plan(task.dsl, listing.tools, checked=task.dsl_checked)
        except CompileError as exc:
            # Unknown tools while a tool service did not answer are missing for now, not unknown:
            # the task is tried again (up to its deliveries), never failed for a restart.
            waiting = bool(listing.missing) and {p.code for p in exc.problems} == {"unknown_tool"}
            if waiting and not delivery.last:
                log.warning("task %s waits for tool services %s (%s)", task.task_id,
                            ", ".join(listing.missing), exc)
                return Nak(delay=TOOLS_BACK_WAIT_S)
            missing = ", ".join(listing.missing)
            error = f"{exc} (tool services that did not answer: {missing})" if waiting else str(exc)
            log.info("task %s does not compile: %s", task.task_id, error)
            await finish_task(events, task.task_id, "failed", error=error, code=exc.code, retry=task.retry)
            await self._ack_final(delivery, task.task_id, "failed")
            return None
        # A resumed, redelivered or retried task runs with the chain it started with.
        llm = self.pool.pinned(task.options.model, cp.chain_revision if cp else None, _pinned_chain(cp))
        pinned = llm.config
        prompts: dict[str, str] = {}
        versions: dict[str, int] = {}
        for name in pinned.prompts:
            chosen = pinned.prompt(name, task.task_id)
            if chosen:
                versions[name], prompts[name] = chosen
        spec = TaskSpec(
            task_id=task.task_id, user_id=task.user_id, input=task.input, session_id=task.session_id,
            token_budget=task.options.token_budget or self.settings.default_token_budget,
            timeout_s=task.options.timeout_s or self.settings.default_task_timeout_s, model=task.options.model,
            retry=task.retry, prompts=prompts, prompt_versions=versions,
            message=task.model_dump(mode="json"), chain=pinned.chain.model_dump(mode="json"),
            guardrail_grey=list(task.guardrail_grey),
        )
        runner = Runner(plan, spec, Deps(llm=llm, tools=self.tools, store=self.store, events=events,
                                         agent=self.agent, checkpoint_limit=self.bus.nc.max_payload,
                                         guardrail=_tier2_guardrail(llm), evaluator=self.evaluator,
                                         streamed=streamed),
                        parallelism=self.settings.task_parallelism)
        job = _Job(task.task_id, runner)
        self.jobs[task.task_id] = job
        # The run answers `tasks.running.<id>` until its message is acked: a redelivered copy
        # standing by elsewhere must not take the ended run for a dead one and run it again. The
        # subscription is this run's alone: one on every task (`tasks.running.*`) would make each
        # dispatcher a responder to its own ask, so a dead dispatcher's task never got "no
        # responders" and waited a whole lease of silence before being taken over.
        answering = await self.bus.nc.subscribe(self.bus.subjects.running(task.task_id), cb=self.standby.on_query)
        try:
            # A first delivery runs with the checkpoint read above; a redelivery reads it again
            # here, at the last moment: a run that held the task before may have checkpointed a
            # node meanwhile, which must not run twice.
            outcome = await runner.run(decisions, stored=cp, read=delivery.attempt == 1)
            _annotate_outcome(outcome)
            if outcome.status == "waiting":
                await self._schedule_approval_timeouts(outcome)
                await delivery.settle(Ack(sync=True))
                return None
            await self._ack_final(delivery, task.task_id, outcome.status)
            return None
        finally:
            with contextlib.suppress(Exception):
                await answering.unsubscribe()
            if self.jobs.get(task.task_id) is job:
                del self.jobs[task.task_id]

    async def _ack_final(self, delivery: Delivery, task_id: str, status: str) -> None:
        """Ack (settled here: the checkpoint may go only once the ack is stored, or a
        redelivery would run the task again), then drop the checkpoint unless a retry may need it."""
        await delivery.settle(Ack(sync=True))
        if status not in RETRYABLE and self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.delete(task_id)

    async def _schedule_approval_timeouts(self, outcome: RunOutcome) -> None:
        cp = outcome.checkpoint
        if cp is None:
            return
        for node_id, waiting in cp.waiting.items():
            if waiting.deadline is None:
                continue
            timer = ResumeMessage(task_id=cp.task_id, node_id=node_id, decision="timeout", by="system",
                                  comment="approval timed out")
            stamp = int(waiting.requested_at.timestamp() * 1000)
            await self.bus.js_publish(self.bus.subjects.tasks_resume, timer,
                                      msg_id=f"{cp.task_id}:resume:{node_id}:timeout:{stamp}")

    # -- cancel -------------------------------------------------------------------------------------
    async def _on_cancel(self, msg: Msg) -> None:
        try:
            cancel = CancelMessage.from_bytes(msg.data)
        except ValueError:
            return
        job = self.jobs.get(cancel.task_id)
        if job is not None and job.runner is not None:
            job.runner.cancel(cancel.reason)

    async def _on_cancel_parked(self, msg: Msg) -> None:
        """One dispatcher ends a parked (waiting) task; running ones are stopped by `_on_cancel`."""
        try:
            cancel = CancelMessage.from_bytes(msg.data)
            assert self.store is not None
            cp = await self.store.load(cancel.task_id)
            if cp is None or cp.status != "waiting" or cp.task is None:
                return
            task = TaskMessage.model_validate(cp.task)
            plan = compile_plan(task.dsl, checked=task.dsl_checked)
            events = RedactingEvents(EventPublisher(self.bus, task.task_id, start_n=max(
                cp.event_n, await last_event_n(self.bus, task.task_id))), self.pool.redactor)
            spec = TaskSpec(task_id=task.task_id, user_id=task.user_id, message=cp.task)
            runner = Runner(plan, spec, Deps(llm=self.pool.pinned(), tools=self.tools, store=self.store,
                                             events=events))
            if await runner.finish_parked("cancelled", cancel.reason, "cancelled") is not None:
                await self.store.delete(task.task_id)
        except Exception:
            log.exception("cancelling a parked task failed")

    # -- redelivery exhausted -----------------------------------------------------------------------
    async def _on_max_deliveries(self, data: bytes, deliveries: int) -> None:
        """Every delivery of a task message failed: its last one crashed, or each ended without
        an answer (its dispatchers died). Raising leaves it to be tried again."""
        try:
            task_id = json.loads(data).get("task_id") if data else None
        except ValueError:
            task_id = None
        if task_id:
            await self._record_exhausted(str(task_id), deliveries)

    async def _record_exhausted(self, task_id: str, deliveries: int) -> None:
        assert self.store is not None
        try:
            cp = await self.store.load(task_id)
        except Exception:  # an unreadable checkpoint may be why every delivery crashed
            log.warning("checkpoint of %s is unreadable; replacing it with the failure", task_id, exc_info=True)
            cp = None
        if cp is not None and cp.status in TERMINAL:
            return
        error = (f"the task was delivered {deliveries} times without finishing "
                 "(its dispatcher kept dying or failing)")
        events = EventPublisher(self.bus, task_id,
                                start_n=max(cp.event_n if cp else 0, await last_event_n(self.bus, task_id)))
        await finish_task(events, task_id, "failed", error=error, code="redelivery_exhausted",
                          retry=cp.retry if cp else 0)
        # A terminal checkpoint makes any stray redelivery a no-op; a retry resumes from it.
        cp = cp or Checkpoint(task_id=task_id)
        cp.status, cp.error, cp.code, cp.event_n = "failed", error, "redelivery_exhausted", events.n
        await self.store.save(cp)
        await self.store.flush()


def _pinned_chain(cp: Checkpoint | None) -> ModelChain | None:
    if cp is None or not cp.chain:
        return None
    try:
        return ModelChain.model_validate(cp.chain)
    except ValueError:
        log.warning("the pinned chain in the checkpoint of %s is unreadable", cp.task_id)
        return None


def _tier2_guardrail(llm: LLM) -> Guard:
    async def guard(spec: TaskSpec, budget: TokenBudget | None) -> tuple[GuardrailEvent, Usage]:
        decision = await classify_input(llm, input_text(spec.input), spec.guardrail_grey, budget=budget)
        return decision.event(spec.task_id), decision.usage

    return guard


async def _ended(bus: Bus, task_id: str) -> bool:
    """The task's log ends with its `done` event."""
    last = await last_event(bus, task_id, "status")
    return last is not None and last.type == "done"


def _annotate(task_id: str, node_id: str | None = None) -> None:
    current = trace.get_current_span()
    current.set_attribute("agentix.task_id", task_id)
    if node_id is not None:
        current.set_attribute("agentix.node_id", node_id)


def _annotate_outcome(outcome: RunOutcome) -> None:
    current = trace.get_current_span()
    current.set_attribute("agentix.status", outcome.status)
    if outcome.status not in ("done", "waiting"):
        current.set_status(Status(StatusCode.ERROR, outcome.code or outcome.status))
