"""A leader kill under streaming tasks, on the production topology, as a client sees it.

A 3-node NATS cluster (JetStream replicas 3) and the services as their own processes, started as
`agentix up` starts them (gateway, two dispatchers, tools-py, tools-go), every one given the
three nodes' URLs. The scripted model streams each answer in 4-character chunks `--chunk-ms`
apart, so a two-agent task streams for about `2 × 18 × chunk` seconds.

Each round submits `--tasks` two-agent tasks and reads each one's SSE stream as a client does,
noting when every event arrives: half with `POST /api/v1/tasks/stream` (submit and follow in one
request; the gateway's feed reads the stream's live republish), half with `POST /api/v1/tasks`
then `GET /api/v1/tasks/{id}/events` (the feed reads the stream with a consumer). Once every task
has streamed a token, the node leading the round's stream is SIGKILLed (`--signal stop`: frozen
with SIGSTOP, its sockets left open, as a machine that vanished): the events stream
(`AGENTIX_EVENTS`) in one phase, the tasks stream (`AGENTIX_TASKS`) in the other; the rounds of
the two phases alternate, so both see the same machine. Per round:

  pause      per task, the longest gap between two of its events that ends after the kill;
             p50 and max across the tasks (the target, 10 s, is on the max; also the max of
             each way of following);
  after the last election
             the max pause minus the slowest election, measured on the survivors' monitoring
             port, of the task-path streams the node led (events, tasks, checkpoints, control)
             and of the meta group if it led it: the part of the pause that is the services';
  stalled    per task, every gap over 1 s after the kill summed (a second stall, say at the
             next node, counts too), with the worst task's stalls and the events around them;
  first      the kill → the first event of any task that arrives after it;
  all done   the kill → the last task's `done`.

Every task must end `done` with both answers streamed once (else the round fails). After the
round the node is started again and the bench waits until the cluster is healthy. Each round
also says which services were connected to the killed node and what it led. `--placement
together` first moves the leaders of all four task-path streams onto the node to be killed (the
worst case; as found, leaders gather on the two survivors of the previous kill).

Run: python -u -m bench.leader_kill [--rounds 10] [--tasks 12] [--chunk-ms 250]
                                    [--signal kill|stop] [--placement as-found|together]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import nats

from agentix.up import SERVICES, Suite, wait_ready
from bench.chat import sse_events
from shared.auth_tokens import mint_token
from shared.bus.names import names_for
from shared.natsd import free_port
from shared.settings import Settings
from tests.support import faults
from tests.support.cluster import NatsCluster
from tests.support.openai_server import OpenAIServer

TARGET_PAUSE_S = 10.0
TASK_WAIT_S = 180.0
STALL_GAP_S = 1.0  # a gap between two events longer than this is a stall (the model streams every 250 ms)
DISPATCHERS = 2
START_ATTEMPTS = 3
META = ""  # `new_leader`'s name for the meta group (no stream has an empty name)
VIA = ("stream", "events")  # half the tasks each way (`Followed.via`)
PHASES = {"events": "events_stream", "tasks": "tasks_stream"}  # phase → the `Names` attribute of its stream


@dataclass
class Followed:
    """One task as its SSE client saw it: when each event arrived, what it streamed, how it ended."""

    name: str
    via: str  # "stream": POST /tasks/stream; "events": POST /tasks, then GET /tasks/{id}/events
    arrived: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # each event's type, as `arrived`
    tokens: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    output: object = None

    @property
    def streaming(self) -> bool:
        return bool(self.tokens)

    def pause_after(self, moment: float) -> float:
        """The longest gap between two consecutive events whose later one arrived after `moment`
        (infinite for a stream cut off before `done`: it never went on)."""
        if self.status != "done":
            return float("inf")
        gaps = [b - a for a, b in itertools.pairwise(self.arrived) if b > moment]
        return max(gaps, default=float("inf"))

    def stalled_after(self, moment: float) -> float:
        """All the time its stream stood still after `moment`: the gaps of more than STALL_GAP_S
        summed (a pause at the kill and another one later, at the next node, both count)."""
        return sum(b - a for a, b in itertools.pairwise(self.arrived) if b > moment and b - a > STALL_GAP_S)

    def stalls_after(self, moment: float) -> str:
        """Each stall after `moment`: when it began (from `moment`), how long it lasted, and the
        events on either side of it (where in the run it stood still)."""
        steps = list(zip(self.arrived, self.kinds, strict=True))
        return ", ".join(f"{a - moment:+.1f} s for {b - a:.1f} s ({before}|{after})"
                         for (a, before), (b, after) in itertools.pairwise(steps) if b > moment and b - a > STALL_GAP_S)

    def problem(self) -> str | None:
        if self.status != "done":
            return f"{self.name} ended {self.status!r}"
        if self.tokens != {"a1": faults.ANSWER, "a2": faults.ANSWER} or self.output != {"out": faults.ANSWER}:
            return f"{self.name}: tokens lost or streamed twice: {self.tokens}"
        return None


@dataclass
class Round:
    phase: str
    victim: str
    at: str  # the kill's wall-clock time, to find it in the services' and the nodes' logs
    meta_leader: bool
    on_victim: list[str]  # the services connected to it
    elections: dict[str, float]  # every task-path stream it led (and "meta") → the kill → its new leader
    pauses: list[float]
    vias: list[str]  # each pause's `Followed.via`
    stalls: list[float]
    stalls_of_worst: str  # the stalls of the task that stood still longest, when and how long
    problems: list[str]  # tasks that did not end `done` with both answers once
    first: float
    all_done: float

    @property
    def resumed(self) -> float:
        """When the last task's pause ended, after the last election of a stream on the tasks'
        path (or of the meta group, which creating a consumer needs): the part of the pause that
        is the services', not JetStream's."""
        return max(self.pauses) - max(self.elections.values(), default=0.0)

    def worst_by_via(self) -> str:
        paired = list(zip(self.pauses, self.vias, strict=True))
        return ", ".join(f"via {via} {max(p for p, v in paired if v == via):.2f} s" for via in VIA)

    def line(self, number: int) -> str:
        worst = max(self.pauses)
        led = ", ".join(f"{name} {s:.2f} s" for name, s in self.elections.items())
        return (f"  {self.phase:<6} round {number:2d} at {self.at}: killed {self.victim} (meta leader: "
                f"{'yes' if self.meta_leader else 'no'}; clients on it: {', '.join(self.on_victim) or 'none'}; "
                f"led and re-elected: {led})\n"
                f"      pause p50 {statistics.median(self.pauses):5.2f} s max {worst:5.2f} s "
                f"({worst / TARGET_PAUSE_S:4.2f}× target; {self.worst_by_via()}), "
                f"{self.resumed:+5.2f} s after the last election\n"
                f"      stalled in all max {max(self.stalls):5.2f} s ({self.stalls_of_worst}); "
                f"first event {self.first:5.2f} s; all done {self.all_done:5.2f} s"
                + "".join(f"\n      FAILED: {problem}" for problem in self.problems))


class Deployment:
    """The cluster, the services and the client, for all rounds."""

    def __init__(self, root: Path, srv: OpenAIServer) -> None:
        self.root = root
        self.srv = srv
        self.cluster = NatsCluster(root=root / "cluster")
        self.port = free_port()
        prefix = f"lk{uuid.uuid4().hex[:6]}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")},
            "AGENTIX_NATS_SERVERS": ",".join(self.cluster.urls), "AGENTIX_JS_REPLICAS": "3",
            "AGENTIX_DATA_DIR": str(root / "data"), "AGENTIX_SUBJECT_PREFIX": prefix,
            "AGENTIX_LLM_BASE_URL": srv.url, "AGENTIX_LLM_MODEL": faults.MODEL, "AGENTIX_LLM_RETRY_ATTEMPTS": "1",
            "AGENTIX_RATE_LIMIT_PER_MIN": "1000000", "PYTHONUNBUFFERED": "1",
        }  # fmt: skip
        self.settings = Settings(data_dir=root / "data", nats_servers=self.cluster.urls, subject_prefix=prefix,
                                 js_replicas=3)
        self.suite = Suite(root / "data", self.env, log_dir=root / "logs")
        self.url = f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        await self.cluster.start()
        migrate = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.gateway", "migrate",
                                                       env=self.env)
        if await migrate.wait() != 0:
            raise RuntimeError("the gateway's migration failed")
        for attempt in range(1, START_ATTEMPTS + 1):
            for name, module in SERVICES:
                copies = DISPATCHERS if name == "dispatcher" else 1
                for i in range(copies):
                    label = f"{name}-{i + 1}" if copies > 1 else name
                    self.suite.spawn(label, module, ["--port", str(self.port)] if name == "gateway" else [])
            if await asyncio.to_thread(wait_ready, self.url, self.suite):
                return
            why = f"the services did not come up: {self.suite.dead() or 'not ready in time'}\n{self.log_tails()}"
            if attempt == START_ATTEMPTS:
                raise RuntimeError(why)
            # A service that dies while the cluster settles is another part of issue 34, not what
            # this bench measures: start them all again.
            print(f"start {attempt} failed, starting again: {why.splitlines()[0]}", flush=True)
            self.suite.stop()
            self.suite = Suite(self.root / "data", self.env, log_dir=self.root / "logs")

    def log_tails(self, lines: int = 20) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
                         for p in sorted((self.root / "logs").glob("*.log")))

    def stop(self) -> None:
        self.suite.stop()
        self.cluster.cleanup()

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {mint_token(self.settings, 'bench')}"}

    def stream_name(self, phase: str) -> str:
        return str(getattr(names_for(self.settings), PHASES[phase]))

    def task_path(self) -> dict[str, str]:
        """The streams a streaming task writes to or reads from, → a short name for the report."""
        names = names_for(self.settings)
        return {names.events_stream: "events", names.tasks_stream: "tasks",
                f"KV_{names.checkpoints_bucket}": "checkpoints", f"KV_{names.control_bucket}": "control"}


async def follow(http: httpx.AsyncClient, dep: Deployment, headers: dict[str, str], task: Followed) -> None:
    body = {"dsl": faults.DSL, "input": {"q": task.name}}
    if task.via == "stream":  # submit and follow in one request: the feed reads the live republish
        events = sse_events(http, f"{dep.url}/api/v1/tasks/stream", headers, method="POST", body=body)
    else:  # submit, then follow: the feed reads the stream with a consumer
        resp = await http.post(f"{dep.url}/api/v1/tasks", json=body, headers=headers)
        resp.raise_for_status()
        events = sse_events(http, f"{dep.url}/api/v1/tasks/{resp.json()['id']}/events", headers)
    try:
        await read(events, task)
    except httpx.HTTPError as exc:  # the gateway ended the stream before `done`: a failure to report
        task.status = f"cut off ({type(exc).__name__}: {exc})"


async def read(events: AsyncIterator[tuple[str, Any]], task: Followed) -> None:
    async for name, data in events:
        if name in ("open", "heartbeat"):  # a heartbeat is the gateway's, every 10 s: not an event of the task
            continue
        task.arrived.append(time.monotonic())
        task.kinds.append(name)
        if name == "token":
            task.tokens[data["node_id"]] = task.tokens.get(data["node_id"], "") + data["text"]
        elif name == "done":
            task.status, task.output = data.get("status"), data.get("output")


async def until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout_s:g} s")
        await asyncio.sleep(0.05)


async def one_round(dep: Deployment, http: httpx.AsyncClient, phase: str, number: int, tasks: int,
                    together: bool, freeze: bool) -> Round:
    stream = dep.stream_name(phase)
    if together:
        await gather_leaders(dep, await dep.cluster.leader_of(stream))
    headers = dep.headers()
    followed = [Followed(f"{phase}{number}-{i}", VIA[i % len(VIA)]) for i in range(tasks)]
    readers = [asyncio.create_task(follow(http, dep, headers, task)) for task in followed]
    try:
        await until(lambda: all(t.streaming for t in followed) or any(r.done() for r in readers), 120,
                    "every task streaming")
        victim = dep.cluster.node(await dep.cluster.leader_of(stream))
        on_victim, meta, leads = await asyncio.to_thread(whos_on, victim.spec.monitor_port, victim.name)
        led = [name for name in dep.task_path() if name in leads]
        at = time.strftime("%H:%M:%S")
        if freeze:  # it hangs with its sockets open, as a machine that vanished: no reset reaches a client
            assert victim.proc is not None
            victim.proc.send_signal(signal.SIGSTOP)
        else:
            victim.kill()
        killed = time.monotonic()
        watched = {name: dep.task_path()[name] for name in led}
        if meta == victim.name:
            watched[META] = "meta"
        elected = {short: asyncio.create_task(new_leader(dep, name, victim.name)) for name, short in watched.items()}
        await asyncio.wait_for(asyncio.gather(*readers), TASK_WAIT_S)
        elections = {name: await asyncio.wait_for(task, TASK_WAIT_S) - killed for name, task in elected.items()}
    finally:
        for reader in readers:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
    problems = [p for p in (t.problem() for t in followed) if p]
    firsts = [next((a for a in t.arrived if a > killed), float("inf")) for t in followed]
    result = Round(phase, victim.name, at, meta == victim.name, on_victim, elections,
                   [t.pause_after(killed) for t in followed], [t.via for t in followed],
                   [t.stalled_after(killed) for t in followed],
                   max(followed, key=lambda t: t.stalled_after(killed)).stalls_after(killed), problems,
                   min(firsts) - killed,
                   max(t.arrived[-1] for t in followed) - killed)
    if freeze:
        victim.kill()
    victim.start()
    await dep.cluster.wait_ready(120)
    return result


async def new_leader(dep: Deployment, stream: str, victim: str) -> float:
    """When a surviving node first names a leader of `stream` (META: of the meta group) other
    than `victim` (polled every 20 ms on the nodes' monitoring port, which answers without a
    leader)."""
    survivors = [n for n in dep.cluster.nodes if n.running and n.name != victim]  # a frozen one still "runs"
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            for node in survivors:
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    jsz = (await http.get(f"http://127.0.0.1:{node.spec.monitor_port}/jsz?streams=true")).json()
                    leaders = {**stream_leaders(jsz), META: str((jsz.get("meta_cluster") or {}).get("leader", ""))}
                    if leaders.get(stream) not in (None, "", victim):
                        return time.monotonic()
            await asyncio.sleep(0.02)


def stream_leaders(jsz: dict[str, Any]) -> dict[str, str]:
    return {d["name"]: (d.get("cluster") or {}).get("leader") or ""
            for account in jsz.get("account_details") or [] for d in account.get("stream_detail") or []}


def whos_on(monitor_port: int, name: str) -> tuple[list[str], str, set[str]]:
    """The names of the client connections a node holds, the meta group's leader as it sees it,
    and the streams it leads."""
    base = f"http://127.0.0.1:{monitor_port}"
    conns = httpx.get(f"{base}/connz?limit=1024", timeout=5).json().get("connections") or []
    jsz = httpx.get(f"{base}/jsz?streams=true", timeout=5).json()
    meta = str((jsz.get("meta_cluster") or {}).get("leader", ""))
    led = {stream for stream, leader in stream_leaders(jsz).items() if leader == name}
    return sorted({c["name"] for c in conns if c.get("name")}), meta, led


async def gather_leaders(dep: Deployment, node: str, timeout_s: float = 60.0) -> None:
    """Move the leadership of every task-path stream to `node` (a stepdown that prefers it), so
    that its kill stalls them all at once: the worst placement."""
    nc = await nats.connect(dep.cluster.urls)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            led = (await asyncio.to_thread(whos_on, dep.cluster.node(node).spec.monitor_port, node))[2]
            missing = [name for name in dep.task_path() if name not in led]
            if not missing:
                return
            for stream in missing:
                with contextlib.suppress(Exception):
                    await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}",
                                     json.dumps({"placement": {"preferred": node}}).encode(), timeout=5)
            await asyncio.sleep(1)
        raise RuntimeError(f"could not move every stream's leader to {node}")
    finally:
        await nc.close()


def summary(phase: str, rounds: list[Round]) -> str:
    worst = [max(r.pauses) for r in rounds]
    every = [p for r in rounds for p in r.pauses]
    firsts = [r.first for r in rounds]
    resumed = [r.resumed for r in rounds]
    stalls = [max(r.stalls) for r in rounds]
    done = [r.all_done for r in rounds]
    over = sum(w > TARGET_PAUSE_S for w in worst)
    failed = sum(len(r.problems) for r in rounds)
    paired = [(p, v) for r in rounds for p, v in zip(r.pauses, r.vias, strict=True)]
    by_via = ", ".join(f"via {via} {max(p for p, v in paired if v == via):.2f} s" for via in VIA)
    return (f"{phase:<6} kill, {len(rounds)} rounds: pause p50 {statistics.median(every):5.2f} s, "
            f"max {max(worst):5.2f} s ({by_via}); worst per round p50 {statistics.median(worst):5.2f} s | "
            f"stalled in all p50 {statistics.median(stalls):5.2f} s max {max(stalls):5.2f} s | "
            f"resumed after the last election p50 {statistics.median(resumed):+5.2f} s max {max(resumed):+5.2f} s | "
            f"first event p50 {statistics.median(firsts):5.2f} s max {max(firsts):5.2f} s | "
            f"all done p50 {statistics.median(done):5.2f} s max {max(done):5.2f} s\n"
            f"RATIO {phase} kill: max pause / target ({TARGET_PAUSE_S:g} s) = {max(worst) / TARGET_PAUSE_S:.2f}× "
            f"(target ≤ 1 in every round: {'ok' if not over else f'OVER in {over} of {len(rounds)}'})"
            + (f"; {failed} task(s) did not end done" if failed else ""))


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextlib.asynccontextmanager
async def deployed(root: Path, srv: OpenAIServer) -> AsyncIterator[Deployment]:
    dep = Deployment(root, srv)
    try:
        await dep.start()
        yield dep
    finally:
        dep.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10, help="rounds per phase (each phase kills one leader a round)")
    parser.add_argument("--tasks", type=int, default=12, help="two-agent tasks streaming at each kill")
    parser.add_argument("--chunk-ms", type=float, default=250.0, help="the model's wait before each 4-char chunk")
    parser.add_argument("--phases", default="events,tasks", help="which leaders to kill: events, tasks or both")
    parser.add_argument("--signal", choices=["kill", "stop"], default="kill",
                        help="stop: SIGSTOP instead of SIGKILL, a node that hangs with its connections open (a machine "
                             "that vanished): its clients notice only when their pings go unanswered")
    parser.add_argument("--placement", choices=["as-found", "together"], default="as-found",
                        help="together: before each kill, move the leaders of every stream on the tasks' path "
                             "(events, tasks, checkpoints, control) to the node to be killed: the worst case")
    parser.add_argument("--keep", action="store_true", help="keep the logs and stores (their path is printed)")
    args = parser.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    srv = OpenAIServer().start_in_thread()
    faults.script_slow_model(srv, delay_s=args.chunk_ms / 1000)
    root = Path(tempfile.mkdtemp(prefix="agentix-leader-kill-"))
    print(f"{os.cpu_count()} cores; {load()}; "
          f"{args.tasks} tasks of 2 agents × 18 chunks {args.chunk_ms:g} ms apart; {root}", flush=True)
    results: dict[str, list[Round]] = {p: [] for p in phases}
    try:
        async with deployed(root, srv) as dep, httpx.AsyncClient(timeout=httpx.Timeout(30, read=TASK_WAIT_S)) as http:
            for number in range(1, args.rounds + 1):
                for phase in phases:
                    results[phase].append(await one_round(dep, http, phase, number, args.tasks,
                                                            args.placement == "together", args.signal == "stop"))
                    print(results[phase][-1].line(number), flush=True)
        for phase in phases:
            print(summary(phase, results[phase]), flush=True)
    finally:
        srv.stop_thread()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
