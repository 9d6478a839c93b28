"""The dispatcher's task worker: pulls task and resume messages from the durable `dispatcher`
consumer, runs graphs with bounded concurrency, keeps each message's lease alive while it works,
checkpoints to KV, emits events, and acks only at a terminal state or when the task is parked.

- Redelivery (a dispatcher died) resumes from the checkpoint; a finished task is acked at once.
- Cancel (`P.tasks.cancel.<id>`): every dispatcher running the task stops it; one dispatcher (a
  queue group) ends a parked task.
- Approval timeouts: parking publishes a `timeout` resume per approval with a deadline; a resume
  that arrives before its deadline is nak'ed with the remaining delay (durable, crash-proof).
- `max_deliver` exhausted: the task is recorded `failed` with code `redelivery_exhausted` (status
  and done events) and the message removed — by the handler itself when its last delivery
  crashes, else on the MAX_DELIVERIES advisory (its dispatchers died), which the dead-letter
  stream keeps until a live dispatcher has recorded it.
- Tracing: each message is handled in a span parented to the sender's context (the gateway's
  HTTP request); nodes, model calls and tool calls are child spans.
- `drain()` (SIGTERM): stop pulling, let in-flight work finish within a grace period, then stop
  the rest and nak their messages so another replica takes them over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.dispatcher.checkpoints_kv import KVCheckpointStore
from services.dispatcher.engine.checkpoint import Checkpoint
from services.dispatcher.engine.compile import CompileError, compile_plan
from services.dispatcher.engine.context import CURRENT_NODE, Deps, Guard, TaskSpec
from services.dispatcher.engine.ports import Decision
from services.dispatcher.engine.runner import Runner, RunOutcome
from services.dispatcher.harness.evaluate import Evaluator
from services.dispatcher.harness.guardrail import classify_input, input_text
from services.dispatcher.harness.redact_events import RedactingEvents
from services.dispatcher.llm.api import TokenBudget
from services.dispatcher.llm.failover import PinnedLLM
from services.dispatcher.llm.pool import ModelPool
from services.dispatcher.llm.react import ReactAgent
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.dead_letters import DeadLetters
from shared.bus.events import EventPublisher, last_event_n
from shared.bus.tools import ToolClient
from shared.bus.tracing import consumer_span
from shared.contract.base import utcnow
from shared.contract.events import DoneEvent, ErrorEvent, GuardrailEvent, StatusEvent
from shared.contract.models import ModelChain, Usage
from shared.contract.task import TERMINAL, CancelMessage, ResumeMessage, TaskMessage
from shared.contract.tools import ToolDescriptor, ToolMeta, ToolReply
from shared.telemetry import span

log = logging.getLogger("agentix.dispatcher.worker")
KEEP_CHECKPOINT = frozenset({"failed", "timeout"})  # a retry resumes from it
TOOLS_TTL_S = 5.0


@dataclass
class _Job:
    task_id: str
    runner: Runner | None = None
    msg: Msg | None = None


class CachedTools:
    """The ToolCaller for runs: ToolClient with the registry cached for a few seconds."""

    def __init__(self, client: ToolClient) -> None:
        self.client = client
        self._tools: list[ToolDescriptor] | None = None
        self._at = 0.0

    async def list_tools(self) -> list[ToolDescriptor]:
        if self._tools is None or time.monotonic() - self._at > TOOLS_TTL_S:
            self._tools = await self.client.list_tools()
            self._at = time.monotonic()
        return self._tools

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
        self.settings = bus.settings
        self.pool = pool
        self.concurrency = concurrency or max(1, min(self.settings.task_max_ack_pending, 16))
        self.tools = CachedTools(ToolClient(bus))
        self.agent = ReactAgent(tool_timeout_s=self.settings.tool_timeout_s, redactor=pool.redactor)
        self.evaluator = Evaluator()
        self.jobs: dict[str, _Job] = {}
        self.done = 0
        self._handlers: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self.concurrency)
        self._stopping = asyncio.Event()
        self._subs: list[Any] = []
        self._pull_task: asyncio.Task[None] | None = None
        self.store: KVCheckpointStore | None = None
        self.max_deliver = self.settings.task_max_deliver
        self._psub: Any = None
        self._dead: DeadLetters | None = None

    @property
    def inflight(self) -> int:
        return len(self._handlers)

    # -- lifecycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        kv = await self.bus.js.key_value(self.bus.names.checkpoints_bucket)
        self.store = KVCheckpointStore(kv)
        s, n = self.bus.subjects, self.bus.names
        nc = self.bus.nc
        self._subs.append(await nc.subscribe(s.cancel_all, cb=self._on_cancel))
        self._subs.append(await nc.subscribe(s.cancel_all, queue="dispatcher-parked", cb=self._on_cancel_parked))
        self._dead = DeadLetters(self.bus, n.dispatcher_consumer, self._on_max_deliveries)
        await self._dead.start()
        with contextlib.suppress(Exception):  # the consumer may predate the current settings
            info = await self.bus.js.consumer_info(n.tasks_stream, n.dispatcher_consumer)
            self.max_deliver = info.config.max_deliver or self.max_deliver
        self._psub = await self.bus.js.pull_subscribe_bind(durable=n.dispatcher_consumer, stream=n.tasks_stream)
        self._pull_task = asyncio.create_task(self._pull_loop(), name="dispatcher-pull")

    async def drain(self, grace_s: float = 30.0) -> None:
        """Stop taking work; finish in-flight tasks within `grace_s`, then hand the rest back."""
        self._stopping.set()
        await cancel_and_wait(self._pull_task)
        if self._dead is not None:
            await self._dead.stop()
        # The pull subscription too: a fetch cut short can leave its queue unfinished, and the
        # connection's drain at exit would then wait out its timeout.
        for sub in [*self._subs, *([self._psub] if self._psub is not None else [])]:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        if self._handlers:
            _, pending = await asyncio.wait(set(self._handlers), timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.flush()

    # -- pulling ------------------------------------------------------------------------------------
    async def _pull_loop(self) -> None:
        while not self._stopping.is_set():
            await self._slots.acquire()  # one slot per message we take
            free = 1
            while free < self.concurrency and not self._slots.locked():
                await self._slots.acquire()
                free += 1
            try:
                msgs = await self._psub.fetch(batch=free, timeout=1.0)
            except (TimeoutError, NatsTimeout):
                msgs = []
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # disconnected: back off, the client reconnects
                log.warning("fetch failed: %s", exc)
                msgs = []
                await asyncio.sleep(0.5)
            for _ in range(free - len(msgs)):
                self._slots.release()
            for msg in msgs:
                task = asyncio.create_task(self._handle(msg))
                self._handlers.add(task)
                task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        self._slots.release()
        self.done += 1
        if not task.cancelled() and task.exception() is not None:
            log.error("task handler crashed", exc_info=task.exception())

    async def _keep_lease(self, msg: Msg) -> None:
        """`in_progress` at ack_wait/3 so JetStream never hands a live task to someone else."""
        interval = max(0.2, self.settings.task_ack_wait_s / 3)
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _handle(self, msg: Msg) -> None:
        lease = asyncio.create_task(self._keep_lease(msg))
        resume = msg.subject == self.bus.subjects.tasks_resume
        operation = "tasks.resume" if resume else "tasks.submit"
        try:
            with consumer_span(f"dispatch {operation}", msg.headers, **{"messaging.destination.name": operation}):
                if resume:
                    await self._handle_resume(msg)
                else:
                    await self._handle_submit(msg)
        except asyncio.CancelledError:
            # Shutdown (drain grace over): the checkpoint holds the progress; hand it over now.
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Exception:
            if self._last_delivery(msg):
                log.exception("task message failed on its last delivery")
                await self._exhausted_on_crash(msg)
            else:
                # Infrastructure trouble (NATS, KV): leave the message for redelivery after ack_wait.
                log.exception("task message failed; it will be redelivered")
        finally:
            lease.cancel()

    def _last_delivery(self, msg: Msg) -> bool:
        try:
            return msg.metadata.num_delivered >= self.max_deliver > 0
        except Exception:  # not a JetStream message
            return False

    # -- submit -------------------------------------------------------------------------------------
    async def _handle_submit(self, msg: Msg) -> None:
        try:
            task = TaskMessage.from_bytes(msg.data)
        except ValueError as exc:
            log.error("dropping a task message that does not parse: %s", exc)
            await msg.term()
            return
        _annotate(task.task_id)
        await self._run(task, msg, decisions=None)

    async def _handle_resume(self, msg: Msg) -> None:
        try:
            resume = ResumeMessage.from_bytes(msg.data)
        except ValueError as exc:
            log.error("dropping a resume message that does not parse: %s", exc)
            await msg.term()
            return
        assert self.store is not None
        _annotate(resume.task_id, resume.node_id)
        cp = await self.store.load(resume.task_id)
        waiting = cp.waiting.get(resume.node_id) if cp else None
        if cp is None or cp.task is None or cp.status in TERMINAL or waiting is None:
            await msg.ack()  # stale or repeated: the task moved on
            return
        if resume.decision == "timeout" and waiting.deadline is not None:
            left = (waiting.deadline - utcnow()).total_seconds()
            if left > 0.05:
                await msg.nak(delay=left)  # the approval's timer: come back at the deadline
                return
        if cp.status != "waiting":
            if resume.decision == "timeout":
                await msg.ack()  # a running task enforces its approval deadlines itself
            else:
                await msg.nak(delay=1.0)  # another dispatcher is still finishing the parallel branches
            return
        decision = Decision(resume.node_id, resume.decision, by=resume.by, comment=resume.comment)
        await self._run(TaskMessage.model_validate(cp.task), msg, decisions={resume.node_id: decision}, cp=cp)

    # -- running ------------------------------------------------------------------------------------
    async def _run(self, task: TaskMessage, msg: Msg, decisions: dict[str, Decision] | None,
                   cp: Checkpoint | None = None) -> None:
        assert self.store is not None
        if cp is None:
            cp = await self.store.load(task.task_id)
        if cp is not None and cp.status in TERMINAL and not (cp.status in KEEP_CHECKPOINT and task.retry > cp.retry):
            await self._ack_final(msg, task.task_id, cp.status)  # redelivered after it ended
            return
        start_n = max(cp.event_n if cp else 0, await last_event_n(self.bus, task.task_id))
        events = RedactingEvents(EventPublisher(self.bus, task.task_id, start_n=start_n), self.pool.redactor)
        try:
            tools = await self.tools.list_tools()
            plan = compile_plan(task.dsl, tools)
        except CompileError as exc:
            await self._fail_unstarted(events, task, exc.code, str(exc))
            await self._ack_final(msg, task.task_id, "failed")
            return
        # A resumed, redelivered or retried task runs with the chain it started with.
        llm = self.pool.pinned(task.options.model, cp.chain_revision if cp else None, _pinned_chain(cp))
        llm.on_breaker = _breaker_notices(events, task.task_id)
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
                                         guardrail=_tier2_guardrail(llm), evaluator=self.evaluator),
                        parallelism=self.settings.task_parallelism)
        job = _Job(task.task_id, runner, msg)
        self.jobs[task.task_id] = job
        try:
            outcome = await runner.run(decisions)
        finally:
            if self.jobs.get(task.task_id) is job:
                del self.jobs[task.task_id]
        _annotate_outcome(outcome)
        if outcome.status == "waiting":
            await self._schedule_approval_timeouts(outcome)
            await msg.ack_sync()
            return
        await self._ack_final(msg, task.task_id, outcome.status)

    async def _ack_final(self, msg: Msg, task_id: str, status: str) -> None:
        """Ack, then drop the checkpoint unless a retry may need it."""
        await msg.ack_sync()
        if status not in KEEP_CHECKPOINT and self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.delete(task_id)

    async def _fail_unstarted(self, events: RedactingEvents, task: TaskMessage, code: str, error: str) -> None:
        await events.emit(StatusEvent(task_id=task.task_id, status="failed", error=error, code=code))
        await events.emit(DoneEvent(task_id=task.task_id, status="failed", error=error))
        await events.flush()

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
            plan = compile_plan(task.dsl)
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
    async def _exhausted_on_crash(self, msg: Msg) -> None:
        """The last delivery crashed: end the task now rather than wait for the advisory."""
        try:
            task_id = json.loads(msg.data).get("task_id") if msg.data else None
            if task_id:
                await self._record_exhausted(str(task_id), msg.metadata.num_delivered)
            await msg.term()  # no redelivery and no MAX_DELIVERIES advisory: handled here
        except Exception:  # e.g. NATS is down: the advisory (or a later redelivery) handles it
            log.exception("recording an exhausted task failed")

    async def _on_max_deliveries(self, seq: int, deliveries: int) -> None:
        """Every delivery of the message at `seq` ended without an answer (its dispatchers died);
        raising leaves the dead letter to be tried again."""
        stream = self.bus.names.tasks_stream
        try:
            raw = await self.bus.js.get_msg(stream, seq)
        except NotFoundError:  # already handled (or the stream was purged)
            return
        data = raw.data or b""
        try:
            task_id = json.loads(data).get("task_id") if data else None
        except ValueError:
            task_id = None
        if task_id:
            await self._record_exhausted(str(task_id), deliveries)
        with contextlib.suppress(NotFoundError):
            await self.bus.js.delete_msg(stream, seq)

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
        await events.emit(StatusEvent(task_id=task_id, status="failed", error=error, code="redelivery_exhausted"))
        await events.emit(DoneEvent(task_id=task_id, status="failed", error=error))
        await events.flush()
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


def _breaker_notices(events: RedactingEvents, task_id: str) -> Callable[[str, str, str], Awaitable[None]]:
    """Breaker news of this task's model calls as `error` events of the node that made the call
    (`breaker_open`, `model_skipped`); the task itself goes on (failover)."""

    async def notice(code: str, model: str, message: str) -> None:
        node_id = CURRENT_NODE.get()
        if node_id is None:  # e.g. the guardrail's call: no node to attach it to; logged only
            log.warning("task %s: %s", task_id, message)
            return
        await events.emit(ErrorEvent(task_id=task_id, node_id=node_id, code=code, message=message))

    return notice


def _tier2_guardrail(llm: PinnedLLM) -> Guard:
    async def guard(spec: TaskSpec, budget: TokenBudget | None) -> tuple[GuardrailEvent, Usage]:
        decision = await classify_input(llm, input_text(spec.input), spec.guardrail_grey, budget=budget)
        return decision.event(spec.task_id), decision.usage

    return guard


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
