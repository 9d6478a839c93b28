"""What the fault tests share: tasks whose two agent nodes stream slowly from the scripted model
server, dispatchers as their own processes, a live reader per task started before the task is
submitted, and the checks made after a fault — every task `done`, no node asked of the model
twice, every task's log numbered 1..N once each, and the replay equal to what the live reader saw."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.events import read_events
from shared.contract.base import utcnow
from shared.contract.events import AnyEvent
from shared.contract.heartbeat import Heartbeat
from shared.contract.models import ModelChain, ModelConfig
from shared.contract.task import TaskMessage
from shared.settings import Settings
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher_process
from tests.support.wait import eventually

MODEL = "slow-m"
ANSWER = "the quick brown fox jumps over the lazy dog, slowly and steadily, twice"
DSL = {"version": "1",
       "nodes": [{"id": "in", "kind": "input"},
                 {"id": "a1", "kind": "agent", "config": {"prompt": "first {{ in.q }}"}},
                 {"id": "a2", "kind": "agent", "config": {"prompt": "second {{ in.q }}"}},
                 {"id": "out", "kind": "output", "config": {"value": "{{ a2 }}"}}],
       "edges": [{"source": "in", "target": "a1"}, {"source": "a1", "target": "a2"},
                 {"source": "a2", "target": "out"}]}


def script_slow_model(srv: oai.OpenAIServer, delay_s: float) -> None:
    """Every chat request streams ANSWER in 4-character chunks, `delay_s` apart."""
    srv.reset()
    srv.script([], model=MODEL, then=oai.reply(ANSWER, delay_s=delay_s))


async def use_model_server(bus: Bus, srv: oai.OpenAIServer) -> None:
    models = {"slow": ModelConfig(id="slow", name="slow", base_url=srv.url, model=MODEL)}
    await ControlPlane(bus).put("models.chain", ModelChain(revision=1, active="slow", fallbacks=[], models=models))


def start_dispatchers(settings: Settings, logs: Path, count: int) -> list[subprocess.Popen[bytes]]:
    env = {"AGENTIX_JS_REPLICAS": str(settings.js_replicas), "AGENTIX_LLM_RETRY_ATTEMPTS": "1"}
    return [dispatcher_process(settings, logs / f"dispatcher{i}.log", **env) for i in range(count)]


async def stop_all(procs: list[subprocess.Popen[bytes]], timeout_s: float = 30.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            await asyncio.wait_for(asyncio.to_thread(proc.wait), timeout_s)
        except TimeoutError:
            proc.kill()
            await asyncio.to_thread(proc.wait)


async def dispatchers_alive(bus: Bus, procs: list[subprocess.Popen[bytes]], timeout_s: float = 60.0) -> None:
    """Until every process has sent a heartbeat (it pulls tasks from then on)."""
    pids = {str(p.pid) for p in procs}
    seen: set[str] = set()
    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"))
    try:
        async with asyncio.timeout(timeout_s):
            while not pids <= seen:
                beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=timeout_s)).data)
                seen.add(beat.instance.split("-")[-2])
    finally:
        await sub.unsubscribe()


@dataclass
class LiveTask:
    """One submitted task and what a live reader saw of it, with when each event arrived."""

    task_id: str
    seen: list[tuple[int, AnyEvent]] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @property
    def streaming(self) -> bool:
        """At least one token has arrived: the task is mid-stream."""
        return any(e.type == "token" for _, e in self.seen)

    @property
    def done(self) -> bool:
        return bool(self.seen) and self.seen[-1][1].type == "done"

    def first_event_after(self, moment: float) -> float | None:
        return next((t for t in self.arrived if t > moment), None)


async def submit_tasks(bus: Bus, prefix: str, count: int) -> list[LiveTask]:
    tasks = [LiveTask(f"{prefix}-{i}") for i in range(count)]
    for task in tasks:
        task.reader = asyncio.create_task(_follow(bus, task))
    for task in tasks:
        message = TaskMessage(task_id=task.task_id, user_id="u1", dsl=DSL, input={"q": task.task_id})
        await bus.js_publish(bus.subjects.tasks_submit, message, msg_id=task.task_id)
    return tasks


async def _follow(bus: Bus, task: LiveTask) -> None:
    async for seq, event in read_events(bus, task.task_id, follow=True):
        task.seen.append((seq, event))
        task.arrived.append(time.monotonic())


async def all_streaming(tasks: list[LiveTask]) -> None:
    async def check() -> bool:
        return all(t.streaming for t in tasks)

    await eventually(check, attempts=3000)


async def all_done(tasks: list[LiveTask], timeout_s: float = 120.0) -> None:
    readers = [t.reader for t in tasks if t.reader is not None]
    try:
        await asyncio.wait_for(asyncio.gather(*readers), timeout_s)
    finally:
        for reader in readers:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader


def asked(srv: oai.OpenAIServer) -> dict[str, int]:
    """How many times each prompt (one per task and node) reached the model."""
    counts: dict[str, int] = {}
    for request in srv.requests():
        messages = request["body"].get("messages") or []
        user = [m for m in messages if m.get("role") == "user"]
        text = str(user[-1].get("content")) if user else ""
        counts[text] = counts.get(text, 0) + 1
    return counts


async def check_logs(bus: Bus, tasks: list[LiveTask], srv: oai.OpenAIServer) -> None:
    """Every task ended `done`; each node was asked once; each log is numbered 1..N once each
    and its replay equals what the live reader saw."""
    check_asked_once(srv, tasks, ("first", "second"))
    await check_streams(bus, tasks)


def check_asked_once(srv: oai.OpenAIServer, tasks: list[LiveTask], prompts: tuple[str, ...]) -> None:
    counts = asked(srv)
    for task in tasks:
        for node in prompts:
            assert counts.get(f"{node} {task.task_id}") == 1, (task.task_id, node, counts.get(f"{node} {task.task_id}"))


async def check_streams(bus: Bus, tasks: list[LiveTask]) -> None:
    """Every task ended `done` with ANSWER; its log is numbered 1..N once each; its replay equals
    what the live reader saw; each agent node's tokens, concatenated, are ANSWER once."""
    for task in tasks:
        last = task.seen[-1][1]
        assert last.type == "done" and last.status == "done", (task.task_id, last)
        assert last.output == {"out": ANSWER}, (task.task_id, last.output)
        replay = [(seq, e) async for seq, e in read_events(bus, task.task_id, follow=False)]
        numbers = sorted(e.n for _, e in task.seen)
        assert numbers == list(range(1, len(numbers) + 1)), (task.task_id, numbers, [e.n for _, e in replay])
        live, again = _digest(task.seen), _digest(replay)
        assert again == live, (task.task_id, [x for x in live if x not in again], [x for x in again if x not in live])
        for node in ("a1", "a2"):
            tokens = "".join(e.text for _, e in replay if e.type == "token" and e.node_id == node)
            assert tokens == ANSWER, (task.task_id, f"tokens of {node} streamed twice or lost", tokens)


def _digest(events: list[tuple[int, AnyEvent]]) -> list[tuple[int, int, str, Any]]:
    return [(seq, e.n, e.type, getattr(e, "text", None)) for seq, e in events]


async def kill_the_owner(beats: dict[str, Heartbeat], procs: list[subprocess.Popen[bytes]],
                         timeout_s: float = 90.0) -> None:
    """SIGKILL the dispatcher that runs the task: called while the held call runs, it waits for a
    heartbeat from every dispatcher sent from then on, and exactly one of them says it runs a task
    (a beat from before can still count the run that parked the task on the other one)."""
    since = utcnow()

    async def owner() -> Heartbeat | None:
        fresh = [b for b in beats.values() if b.ts >= since]
        running = [b for b in fresh if b.load.inflight > 0]
        return running[0] if len(fresh) == len(procs) and len(running) == 1 else None

    running = await eventually(owner, attempts=int(timeout_s / 0.05), every_s=0.05)
    victim = next(p for p in procs if p.pid == int(running.instance.split("-")[-2]))
    victim.send_signal(signal.SIGKILL)
    await asyncio.to_thread(victim.wait)
