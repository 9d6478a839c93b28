"""End to end against LangGraph's Agent Server: the same graph — input → agent → agent → agent →
output, each agent one streamed chat-completions call — run by both servers, which this bench
starts itself, against the same scripted OpenAI-protocol model server (its own process, every
answer the same ANSWER in 4-character chunks):

  Agentix    the whole tree as processes, started as `agentix up` starts it (tests/e2e's
             `start_suite`): nats-server, gateway, dispatcher, tools-py, tools-go. A run is
             `POST /api/v1/tasks/stream` with a DSL of three `agent` nodes (submit and follow in
             one request, as LangGraph's `runs.stream` is), read until `done`.
  LangGraph  `langgraph dev` (langgraph-cli[inmem], the in-memory runtime) with
             `--n-jobs-per-worker 50`, serving bench/langgraph_app (a StateGraph of three async
             nodes calling the model with `openai.AsyncOpenAI`, stream=True). A run is a
             threadless `client.runs.stream(None, "chain", stream_mode="custom")` with the
             langgraph_sdk, read until the stream ends.

Measured, the two servers taking turns (A, B, A, B …) so both see the same machine load:
  (1) one run at a time, `--samples` each: p50 of run latency (submit → run ended) and of first
      token (submit → first token event on the stream);
  (2) `--pairs` pairs of batches of `--runs` runs with `--inflight` in flight, the servers taking
      turns (Agentix then LangGraph, then LangGraph then Agentix, …: a machine that drifts over
      the minutes weighs on both alike): runs/s and server CPU per run — user+sys CPU seconds
      (/proc/<pid>/stat) of each server's whole process tree over its batches, divided by the
      runs. The model server's and this client's CPU are not counted.
Every run must end `done` with all three answers streamed, else it counts as failed.

At a model's pace (`--first-chunk-ms`: the model waits that long before its first chunk, a hosted
model's time to first token; `--chunk-ms` before each chunk) the batches of (2) take turns with
batches of Agentix against the instant model, and the bench also prints: the ideal throughput
(`--inflight` ÷ Agentix's p50 single-run time from (1)) and how much of it Agentix reached
(target >= 0.80), and Agentix's CPU per run at the pace against its CPU per run with the instant
model measured in the same invocation (target <= 1.5x). `--agentix-only` leaves LangGraph out
(it need not be installed): Agentix against itself.

LangGraph is NOT installed into the project's venv: langgraph-api pins older grpcio, protobuf
(<7) and jsonschema-rs than the project's environment has (checked with `pip install --dry-run`),
so it lives in a venv of its own:
    python3.11 -m venv /tmp/lgvenv && /tmp/lgvenv/bin/pip install "langgraph-cli[inmem]" openai
The bench's client side (langgraph_sdk, httpx) comes from the project's venv.

Run: python -u -m bench.e2e [--runs 200] [--inflight 50] [--pairs 3] [--samples 20]
                            [--chunk-ms 0] [--first-chunk-ms 0] [--agentix-env NAME=VALUE ...]
                            [--langgraph /tmp/lgvenv/bin/langgraph | --agentix-only] [--cluster 3]
     e.g. the issue's hosted pace, Agentix alone:
     python -u -m bench.e2e --agentix-only --first-chunk-ms 400 --chunk-ms 15
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from bench.chat import sse_events
from bench.memory import children
from bench.token_path import cpu_seconds, start_model_server
from shared.natsd import free_port, stop_process
from tests.e2e.conftest import RunningSuite, start_suite
from tests.support.cluster import NatsCluster
from tests.support.openai_server import ScriptClient, Step, reply

if TYPE_CHECKING:  # LangGraph's client is imported only when LangGraph takes part (--agentix-only)
    from langgraph_sdk.client import LangGraphClient

APP_DIR = Path(__file__).resolve().parent / "langgraph_app"
MODEL = "m"
QUESTION = "How do three agents in a row answer a question?"
ANSWER = "Each agent reads what the one before it wrote and streams its own short answer back to you."
RUN_WAIT_S = 300.0
SETTLE_S = 1.0  # after a batch: the servers finish what follows a run's end (records, acks) before the CPU is read
LANGGRAPH_JOBS = 50  # `--n-jobs-per-worker`: runs one LangGraph worker executes at once
WARMUP = 3  # runs per server before measuring: imports, connections, the graph's first compile
INSTANT = "Agentix, instant model"  # the road a paced run's CPU is compared with
INSTALL_HINT = ('install it into a venv of its own (not the project\'s): python3.11 -m venv /tmp/lgvenv && '
                '/tmp/lgvenv/bin/pip install "langgraph-cli[inmem]" openai; then pass --langgraph '
                '/tmp/lgvenv/bin/langgraph')

DSL = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"},
              {"id": "a1", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
              {"id": "a2", "kind": "agent", "config": {"prompt": "{{ a1.output }}"}},
              {"id": "a3", "kind": "agent", "config": {"prompt": "{{ a2.output }}"}},
              {"id": "out", "kind": "output", "config": {"value": "{{ a3.output }}"}}],
    "edges": [{"source": "in", "target": "a1"}, {"source": "a1", "target": "a2"},
              {"source": "a2", "target": "a3"}, {"source": "a3", "target": "out"}],
}

Run = Callable[[], Awaitable[tuple[float, float]]]  # one run → (first token s, run s)


@dataclass
class Road:
    """What a batch runs: one server's runs, the process trees whose CPU counts, and the model's
    answer (its pace) while the batch runs."""

    name: str
    run: Run
    roots: dict[str, int]
    answer: Step


class LangGraphServer:
    """`langgraph dev` on a free port, in a scratch directory: its in-memory runtime persists to
    `.langgraph_api/` under the working directory, which must not be the repository."""

    def __init__(self, exe: str, model_url: str) -> None:
        self.exe, self.model_url = exe, model_url
        self.work = Path(tempfile.mkdtemp(prefix="bench-e2e-langgraph-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, jobs: int, timeout_s: float = 120.0) -> None:
        # The config's paths are relative to the working directory; point them at the app.
        config = json.loads((APP_DIR / "langgraph.json").read_text())
        config["dependencies"] = [str(APP_DIR)]
        config["graphs"] = {g: str(APP_DIR / spec.removeprefix("./")) for g, spec in config["graphs"].items()}
        (self.work / "langgraph.json").write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items()  # no tracing key, no project venv or path
               if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "AGENTIX_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        env |= {"BENCH_MODEL_URL": self.model_url, "BENCH_MODEL": MODEL, "LANGGRAPH_CLI_NO_ANALYTICS": "1",
                "LANGSMITH_TRACING": "false", "PYTHONDONTWRITEBYTECODE": "1"}
        # --no-reload: no file watcher burning CPU beside the server; WARNING logs, as Agentix runs.
        argv = [self.exe, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(self.port),
                "--n-jobs-per-worker", str(jobs), "--server-log-level", "WARNING",
                "--config", str(self.work / "langgraph.json")]
        with (self.work / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, cwd=self.work, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError(f"langgraph dev not ready in {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join((self.work / "server.log").read_text(errors="replace").splitlines()[-lines:])

    def version(self) -> str:
        info = httpx.get(f"{self.url}/info", timeout=5).json()
        return f"langgraph-api {info.get('version')}, langgraph {info.get('langgraph_py_version')}"

    def stop(self) -> None:
        stop_process(self.proc, grace_s=30)
        shutil.rmtree(self.work, ignore_errors=True)


def tree_cpu(roots: dict[str, int]) -> dict[tuple[str, int], float]:
    """CPU seconds so far of every live process under each named root, the root included."""
    out: dict[tuple[str, int], float] = {}
    for name, root in roots.items():
        for pid in (root, *children(root)):
            with contextlib.suppress(OSError):  # exited between the listing and the read
                out[(name, pid)] = cpu_seconds(pid)
    return out


@dataclass
class Batch:
    runs: int
    wall: float = 0.0
    done: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # per root name, seconds
    failures: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # processes that exited during the batch

    @property
    def rate(self) -> float:
        return self.done / self.wall

    @property
    def cpu_per_run(self) -> float:
        return sum(self.cpu.values()) / self.runs

    @classmethod
    def total(cls, batches: list[Batch]) -> Batch:
        """Several batches of one server as one: runs, wall time and CPU summed."""
        out = cls(sum(b.runs for b in batches), wall=sum(b.wall for b in batches), done=sum(b.done for b in batches))
        for one in batches:
            for proc, seconds in one.cpu.items():
                out.cpu[proc] = out.cpu.get(proc, 0.0) + seconds
        return out


async def batch(run: Run, runs: int, inflight: int, roots: dict[str, int]) -> Batch:
    gate = asyncio.Semaphore(inflight)

    async def one() -> tuple[float, float]:
        async with gate:
            return await asyncio.wait_for(run(), RUN_WAIT_S)

    out = Batch(runs)
    before = tree_cpu(roots)
    t0 = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(runs)), return_exceptions=True)
    out.wall = time.perf_counter() - t0
    await asyncio.sleep(SETTLE_S)
    after = tree_cpu(roots)
    for (name, pid), seconds in after.items():
        out.cpu[name] = out.cpu.get(name, 0.0) + seconds - before.get((name, pid), 0.0)
    out.lost = [f"{name} pid {pid}" for name, pid in before if (name, pid) not in after]
    for result in results:
        if isinstance(result, BaseException):
            out.failures.append(f"{type(result).__name__}: {result}")
        else:
            out.done += 1
    return out


def check_tokens(server: str, chars: int) -> None:
    if chars != 3 * len(ANSWER):  # all three agents' answers streamed, nothing lost or doubled
        raise RuntimeError(f"{server}: streamed {chars} characters, expected {3 * len(ANSWER)}")


def agentix_run(http: httpx.AsyncClient, suite: RunningSuite, headers: dict[str, str]) -> Run:
    async def run() -> tuple[float, float]:
        t0 = time.perf_counter()
        first, chars = 0.0, 0
        async for name, data in sse_events(http, f"{suite.url}/api/v1/tasks/stream", headers, method="POST",
                                           body={"dsl": DSL, "input": {"text": QUESTION}}):
            if name == "token":
                first = first or time.perf_counter() - t0
                chars += len(data["text"])
            elif name == "done":
                if data.get("status") != "done":
                    raise RuntimeError(f"Agentix task ended {data}")
                check_tokens("Agentix", chars)
                return first, time.perf_counter() - t0
        raise RuntimeError("Agentix: the stream ended without `done`")

    return run


def langgraph_run(lg: LangGraphClient) -> Run:
    async def run() -> tuple[float, float]:
        t0 = time.perf_counter()
        first, chars = 0.0, 0
        async for part in lg.runs.stream(None, "chain", input={"text": QUESTION}, stream_mode="custom"):
            if part.event == "custom":
                first = first or time.perf_counter() - t0
                chars += len(part.data["token"])
            elif part.event == "error":
                raise RuntimeError(f"LangGraph run failed: {part.data}")
        check_tokens("LangGraph", chars)
        return first, time.perf_counter() - t0

    return run


def nats_pids(suite: RunningSuite, cluster: NatsCluster | None) -> dict[str, int]:
    """The nats-server processes whose CPU counts: the embedded one, or every node of the cluster."""
    if cluster is None:
        assert suite.nats is not None and suite.nats.proc is not None
        return {"nats-server": suite.nats.proc.pid}
    return {f"nats-server {node.name}": node.proc.pid for node in cluster.nodes if node.proc is not None}


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


async def latency(runs: dict[str, Run], samples: int) -> dict[str, tuple[float, float]]:
    """p50 (first token, run) per server, the servers taking turns run by run."""
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(samples):
        for name, run in runs.items():
            got[name].append(await run())
    return {name: (statistics.median(f for f, _ in s), statistics.median(r for _, r in s)) for name, s in got.items()}


def ratio(label: str, a: float, b: float, target: str = "", of: str = "Agentix / LangGraph") -> None:
    print(f"RATIO {label} {of} = {a / b:.2f}x{f' (target {target})' if target else ''}")


def report_batch(name: str, out: Batch) -> None:
    parts = ", ".join(f"{proc} {seconds / out.runs * 1000:.1f}" for proc, seconds in out.cpu.items())
    print(f"    {name:9s} {out.done}/{out.runs} done in {out.wall:6.1f} s = {out.rate:6.2f} runs/s; "
          f"server CPU {out.cpu_per_run * 1000:6.1f} ms/run ({parts}); {load()}")
    for failure in out.failures[:10]:
        print(f"      FAILED {failure[:300]}")
    if len(out.failures) > 10:
        print(f"      … and {len(out.failures) - 10} more failures")
    if out.lost:
        print(f"      exited during the batch (their CPU is missing): {', '.join(out.lost)}")


async def bench(suite: RunningSuite, lgserver: LangGraphServer | None, roots: dict[str, dict[str, int]],
                opts: argparse.Namespace, model: ScriptClient) -> None:
    runs, inflight, samples, pairs = opts.runs, opts.inflight, opts.samples, opts.pairs
    paced = reply(ANSWER, delay_s=opts.chunk_ms / 1000, first_delay_s=opts.first_chunk_ms / 1000)
    at_pace = opts.chunk_ms > 0 or opts.first_chunk_ms > 0
    # Idle connections are dropped before the servers' keep-alive timeout (uvicorn: 5 s) would
    # close them under a request reusing one ("Server disconnected without sending a response").
    limits = httpx.Limits(max_connections=inflight * 2 + 20, max_keepalive_connections=inflight + 20,
                          keepalive_expiry=3.0)
    async with contextlib.AsyncExitStack() as stack:
        # (connect, read, write, pool): a run's stream may stay quiet while it waits in the queue.
        http = await stack.enter_async_context(
            httpx.AsyncClient(timeout=httpx.Timeout(30, read=RUN_WAIT_S), limits=limits))
        run = {"Agentix": agentix_run(http, suite, suite.headers("bench"))}
        if lgserver is not None:
            from langgraph_sdk import get_client

            lg = get_client(url=lgserver.url, api_key=None, timeout=(30.0, RUN_WAIT_S, 30.0, 30.0))
            stack.push_async_callback(lg.aclose)
            run["LangGraph"] = langgraph_run(lg)
        model.script([], then=paced)
        for _ in range(WARMUP):
            for one in run.values():
                await one()
        print(f"(1) one run at a time, {samples} samples each, interleaved; {load()}")
        p50 = await latency(run, samples)
        for i, what in enumerate(("first token", "run latency")):
            print(f"    p50 {what}: " + ", ".join(f"{name} {ms(p50[name][i])}" for name in run))
        if lgserver is not None:
            ratio("p50 first token", p50["Agentix"][0], p50["LangGraph"][0])
            ratio("p50 run latency", p50["Agentix"][1], p50["LangGraph"][1])
        roads = [Road(name, one, roots[name], paced) for name, one in run.items()]
        if at_pace:
            roads.append(Road(INSTANT, run["Agentix"], roots["Agentix"], reply(ANSWER)))
        print(f"(2) {pairs} pair(s) of batches of {runs} runs, {inflight} in flight, taking turns "
              f"({', '.join(r.name for r in roads)}, then the other way round, …); server CPU per run by "
              f"process tree (ms); {load()}")
        out: dict[str, list[Batch]] = {road.name: [] for road in roads}
        for pair in range(pairs):
            for road in (roads if pair % 2 == 0 else reversed(roads)):
                model.script([], then=road.answer)
                out[road.name].append(await batch(road.run, runs, inflight, road.roots))
                report_batch(road.name, out[road.name][-1])
        total = {name: Batch.total(batches) for name, batches in out.items()}
        if pairs > 1:
            print(f"    all {pairs} pairs: " + "; ".join(
                f"{name} {b.rate:.2f} runs/s, {b.cpu_per_run * 1000:.1f} ms/run" for name, b in total.items()))
        if lgserver is not None:
            ratio("runs/s", total["Agentix"].rate, total["LangGraph"].rate, ">= 3x")
            ratio("CPU per run", total["Agentix"].cpu_per_run, total["LangGraph"].cpu_per_run, "<= 0.5x")
        if at_pace:
            # One run alone takes the model's time; `inflight` of them at once, none waiting on
            # another, would each take as long: the ideal throughput.
            single = p50["Agentix"][1]
            ideal = min(inflight, runs) / single
            print(f"    Agentix at the pace: one run alone {ms(single)} (p50), so {min(inflight, runs)} in flight "
                  f"ideally make {ideal:.2f} runs/s; reached {total['Agentix'].rate:.2f} runs/s")
            ratio("runs/s", total["Agentix"].rate, ideal, ">= 0.80", of="Agentix / ideal")
            ratio("CPU per run", total["Agentix"].cpu_per_run, total[INSTANT].cpu_per_run, "<= 1.5x",
                  of="Agentix at the pace / instant model")


def find_langgraph(given: str | None) -> str:
    exe = given or shutil.which("langgraph")
    if not exe or not os.access(exe, os.X_OK):
        raise SystemExit(f"`langgraph` not found{f' at {given}' if given else ' on PATH'}: {INSTALL_HINT}")
    return exe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="runs in the throughput batch, per server")
    parser.add_argument("--inflight", type=int, default=50, help="runs in flight during the batch")
    parser.add_argument("--samples", type=int, default=20, help="one-at-a-time runs per server")
    parser.add_argument("--pairs", type=int, default=3,
                        help="throughput batches per server, taking turns (the ratios are of all of them)")
    parser.add_argument("--langgraph", metavar="PATH", help="the `langgraph` executable (default: on PATH)")
    parser.add_argument("--agentix-only", action="store_true",
                        help="leave LangGraph out (it need not be installed): Agentix against itself")
    parser.add_argument("--chunk-ms", type=float, default=0.0,
                        help="the model waits this long before each streamed chunk (default 0: it streams "
                             "as fast as it can; 10-15 is about a hosted model's pace)")
    parser.add_argument("--agentix-env", metavar="NAME=VALUE", action="append", default=[],
                        help="a setting for the Agentix services, e.g. AGENTIX_TOKEN_EVENT_INTERVAL_MS=100 "
                             "(repeatable)")
    parser.add_argument("--first-chunk-ms", type=float, default=0.0,
                        help="the model waits this long before its first chunk (default 0; a hosted "
                             "model's time to first token is some hundreds of ms, e.g. 400)")
    parser.add_argument("--cluster", type=int, default=0, metavar="N",
                        help="run Agentix on the production topology: N routed nats-servers, JetStream "
                             "replicas across them, 3 at most (as deploy/compose.yml and `agentix up --cluster N`); "
                             "default: the embedded single server")
    args = parser.parse_args()
    exe = None if args.agentix_only else find_langgraph(args.langgraph)
    print(f"{os.cpu_count()} cores; {load()}; langgraph: {exe or 'left out'}; the model waits "
          f"{args.first_chunk_ms:g} ms before its first chunk and {args.chunk_ms:g} ms per chunk"
          f"{'; Agentix with ' + ' '.join(args.agentix_env) if args.agentix_env else ''}")
    model_proc, model_url = start_model_server()
    model = ScriptClient(model_url)  # every call, both servers: the same answer (at the road's pace)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-e2e-agentix-"))
    lgserver = LangGraphServer(exe, model_url) if exe else None
    suite: RunningSuite | None = None
    cluster = NatsCluster(args.cluster, data_dir / "cluster") if args.cluster else None
    try:
        if cluster is not None:
            asyncio.run(cluster.start())
        suite = start_suite(data_dir, {
            "AGENTIX_LLM_BASE_URL": model_url, "AGENTIX_LLM_MODEL": MODEL, "AGENTIX_LOG_LEVEL": "WARNING",
            "AGENTIX_RATE_LIMIT_PER_MIN": "1000000",  # a benchmark, not a rate-limit test
            "AGENTIX_HEARTBEAT_INTERVAL_S": "5",  # the default (start_suite's 1 s is for quick tests)
            **dict(setting.split("=", 1) for setting in args.agentix_env),
        }, cluster.urls if cluster else None)
        agentix = {c.spec.name: c.proc.pid for c in suite.suite.children if c.proc is not None}
        roots = {"Agentix": {**agentix, **nats_pids(suite, cluster)}}
        print(f"Agentix: {', '.join(roots['Agentix'])} on {suite.url}")
        if lgserver is not None:
            lgserver.start(jobs=LANGGRAPH_JOBS)
            assert lgserver.proc is not None
            roots["LangGraph"] = {"langgraph-dev": lgserver.proc.pid}
            print(f"LangGraph: langgraph dev ({lgserver.version()}), in-memory runtime, "
                  f"{LANGGRAPH_JOBS} jobs per worker, on {lgserver.url}")
        asyncio.run(bench(suite, lgserver, roots, args, model))
        print(f"end; {load()}")
    finally:
        if lgserver is not None:
            lgserver.stop()
        if suite is not None:
            suite.stop()
        if cluster is not None:
            cluster.cleanup()
        model_proc.kill()
        model_proc.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
