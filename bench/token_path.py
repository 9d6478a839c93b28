"""Token path throughput: the scripted OpenAI-protocol server (in its own process) streamed
(1) by the bare `openai` client — the baseline,
(2) through the model pool (failover chain, breaker check, budget, streaming redaction),
(3) through the pool → EventPublisher → JetStream (publish only),
(4) through the pool → EventPublisher → JetStream → `read_events` in another process (what the
    gateway's SSE endpoint reads), timed until that reader has seen the `done` event,
(5) the full path: a task submitted over HTTP to the gateway process, run by the dispatcher
    process (`python -m services.dispatcher`: compile, runner, checkpoints, pool, redaction,
    events), its `/stream` read over SSE from the gateway process by this process, timed from
    the POST until the SSE `done` event,
same server, same run. Prints tokens/s, the ratios (target ≥ 0.5×) and CPU µs per token: of this
process for (1)–(4), and of the dispatcher and gateway *processes* for (5) (from
/proc/<pid>/stat before and after each task).
Tokens are counted from the text (one token = one "tok " chunk): the pool merges deltas that
arrive while an event is still being published or within the token interval after it
(`AGENTIX_TOKEN_EVENT_INTERVAL_MS`), so events may carry several tokens.

Run: python -m bench.token_path [--tokens 20000] [--rounds 3] [--no-coalesce]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import openai

from agentix.sse import parse_stream
from services.dispatcher.llm.api import Delta, LLMRequest, TokenBudget
from services.dispatcher.llm.chain_config import ModelControl
from services.dispatcher.llm.pool import ModelPool
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events
from shared.contract.events import DoneEvent, TokenEvent
from shared.contract.models import ModelChain, ModelConfig, ModelParams
from shared.natsd import NatsServer, free_port
from shared.settings import Settings
from tests.support.openai_server import ScriptClient, reply

MESSAGES = [{"role": "user", "content": "stream please"}]
TOKEN = "tok "


async def reader_main(nats_url: str, prefix: str, task_id: str) -> None:
    """Child process: read one task's events until `done`; print when, and how many tokens."""
    settings = Settings(nats_servers=[nats_url], subject_prefix=prefix, data_dir=Path(tempfile.mkdtemp()))
    bus = await Bus.connect(settings, "bench-reader")
    chars = 0
    events = read_events(bus, task_id).__aiter__()
    print("READY", flush=True)
    async for _, event in events:
        if isinstance(event, TokenEvent):
            chars += len(event.text)
    print(f"DONE {time.time()} {chars // len(TOKEN)}", flush=True)
    await bus.close()


def start_model_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"model server did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


TASK_DSL = {
    "version": "1",
    "nodes": [{"id": "in", "kind": "input"},
              {"id": "ans", "kind": "agent", "config": {"prompt": "{{ in.text }}"}},
              {"id": "out", "kind": "output", "config": {"value": "{{ ans }}"}}],
    "edges": [{"source": "in", "target": "ans"}, {"source": "ans", "target": "out"}],
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Services:
    """The dispatcher and gateway as processes, configured with the scripted model server."""

    def __init__(self, nats_url: str, model_url: str) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="token-path-"))
        self.port = free_port()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")},
            "AGENTIX_NATS_SERVERS": nats_url,
            "AGENTIX_SUBJECT_PREFIX": f"bench{uuid.uuid4().hex[:6]}",
            "AGENTIX_DATA_DIR": str(self.data_dir),
            "AGENTIX_LLM_BASE_URL": model_url,
            "AGENTIX_LLM_MODEL": "m",
            "AGENTIX_LOG_LEVEL": "WARNING",
        }
        self.settings = Settings(data_dir=self.data_dir, nats_servers=[nats_url],
                                 subject_prefix=self.env["AGENTIX_SUBJECT_PREFIX"])
        self.token = mint_token(self.settings, "bench")  # creates the JWT secret the gateway reads
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        log = (self.data_dir / "services.log").open("ab")
        subprocess.run([sys.executable, "-m", "services.gateway", "migrate"], env=self.env, check=True,
                       stdout=log, stderr=subprocess.STDOUT)
        for name, args in (("dispatcher", ["-m", "services.dispatcher"]),
                           ("gateway", ["-m", "services.gateway", "--port", str(self.port)])):
            self.procs[name] = subprocess.Popen([sys.executable, *args], env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited; see {self.data_dir / 'services.log'}")
            try:
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"gateway not ready; see {self.data_dir / 'services.log'}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    async def run_task(self, client: httpx.AsyncClient) -> tuple[int, float, float, float]:
        """(tokens read over SSE, wall seconds, dispatcher CPU s, gateway CPU s) for one task."""
        headers = {"Authorization": f"Bearer {self.token}"}
        cpu0 = {n: cpu_seconds(p.pid) for n, p in self.procs.items()}
        t0 = time.perf_counter()
        resp = await client.post(f"{self.url}/api/v1/tasks", json={"dsl": TASK_DSL, "input": {"text": "go"}},
                                 headers=headers)
        resp.raise_for_status()
        chars = 0
        async with client.stream("GET", f"{self.url}/api/v1/tasks/{resp.json()['id']}/stream",
                                 headers=headers) as stream:
            lines = stream.aiter_lines()
            buffered: list[str] = []
            async for line in lines:
                buffered.append(line)
                if line:
                    continue
                for event in parse_stream(iter(buffered)):
                    if event.event == "token":
                        chars += len(event.data["text"])
                    elif event.event == "done":
                        if event.data.get("status") != "done":
                            raise RuntimeError(f"task ended {event.data}")
                        wall = time.perf_counter() - t0
                        cpu = {n: cpu_seconds(p.pid) - cpu0[n] for n, p in self.procs.items()}
                        return chars // len(TOKEN), wall, cpu["dispatcher"], cpu["gateway"]
                buffered = []
        raise RuntimeError("the SSE stream ended without a done event")


async def measure(run: Callable[[], Awaitable[int]], tokens: int, rounds: int) -> tuple[float, float]:
    """(median tokens/s, median CPU µs per token of this process)."""
    rates, cpu = [], []
    for _ in range(rounds):
        c0, t0 = time.process_time(), time.perf_counter()
        got = await run()
        wall, used = time.perf_counter() - t0, time.process_time() - c0
        if got != tokens:
            raise RuntimeError(f"expected {tokens} tokens, got {got}")
        rates.append(tokens / wall)
        cpu.append(used / tokens * 1e6)
    return statistics.median(rates), statistics.median(cpu)


async def main(tokens: int, rounds: int, coalesce: bool = True) -> None:
    model_proc, url = start_model_server()
    nats = NatsServer().start()
    try:
        # One token per chunk, like a real model; usage reported at the end.
        ScriptClient(url).script([], then=reply([TOKEN] * tokens))
        settings = Settings(
            nats_servers=[nats.url],
            subject_prefix=f"bench{uuid.uuid4().hex[:6]}",
            data_dir=Path(tempfile.mkdtemp()),
            llm_base_url=None,
        )
        bus = await Bus.connect(settings, "bench-token-path")
        await bus.declare()
        cfg = ModelConfig(id="m", name="m", base_url=url, model="m", params=ModelParams(timeout_s=60))
        chain = ModelChain(revision=1, active="m", models={"m": cfg})
        pool = ModelPool(settings, control=ModelControl(settings, chain=chain), coalesce_deltas=coalesce)
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)

        async def bare_client() -> int:
            n = 0
            stream = await client.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    n += 1
            return n

        async def through_pool() -> int:
            chars = [0]

            async def on_delta(delta: Delta) -> None:
                chars[0] += len(delta.text)

            budget = TokenBudget(limit=10 * tokens + 1000)
            await pool.pinned().complete(LLMRequest(messages=MESSAGES), budget=budget, on_delta=on_delta)
            return chars[0] // len(TOKEN)

        async def pool_then_publish() -> int:
            task_id = uuid.uuid4().hex
            publisher = EventPublisher(bus, task_id)
            chars = [0]

            async def on_delta(delta: Delta) -> None:
                chars[0] += len(delta.text)
                await publisher.emit(TokenEvent(task_id=task_id, node_id="ans", text=delta.text, model=delta.model))

            await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)
            await publisher.emit(DoneEvent(task_id=task_id, status="done"))
            await publisher.flush()
            return chars[0] // len(TOKEN)

        async def to_reader_process() -> tuple[float, float]:
            task_id = uuid.uuid4().hex
            reader = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.token_path",
                "--read",
                task_id,
                "--nats",
                nats.url,
                "--prefix",
                settings.subject_prefix,
                stdout=asyncio.subprocess.PIPE,
            )
            assert reader.stdout is not None
            assert (await reader.stdout.readline()).strip() == b"READY"
            publisher = EventPublisher(bus, task_id)

            async def on_delta(delta: Delta) -> None:
                await publisher.emit(TokenEvent(task_id=task_id, node_id="ans", text=delta.text, model=delta.model))

            t0 = time.time()
            await pool.pinned().complete(LLMRequest(messages=MESSAGES), on_delta=on_delta)
            await publisher.emit(DoneEvent(task_id=task_id, status="done"))
            await publisher.flush()
            _, when, count = (await reader.stdout.readline()).decode().split()
            await reader.wait()
            if int(count) != tokens:
                raise RuntimeError(f"reader saw {count} tokens, expected {tokens}")
            events = publisher.n
            return tokens / (float(when) - t0), tokens / events

        services = Services(nats.url, url)
        services.start()
        http = httpx.AsyncClient(timeout=httpx.Timeout(10, read=120))

        async def full_path() -> tuple[float, float, float]:
            got, wall, dispatcher_cpu, gateway_cpu = await services.run_task(http)
            if got != tokens:
                raise RuntimeError(f"SSE client saw {got} tokens, expected {tokens}")
            return tokens / wall, dispatcher_cpu / tokens * 1e6, gateway_cpu / tokens * 1e6

        await bare_client()  # warm up connections and imports
        await through_pool()
        await full_path()
        base_rate, base_cpu = await measure(bare_client, tokens, rounds)
        pool_rate, pool_cpu = await measure(through_pool, tokens, rounds)
        pub_rate, pub_cpu = await measure(pool_then_publish, tokens, rounds)
        runs = [await to_reader_process() for _ in range(rounds)]
        end_rate = statistics.median(r[0] for r in runs)
        per_event = statistics.median(r[1] for r in runs)
        full = [await full_path() for _ in range(rounds)]
        full_rate = statistics.median(r[0] for r in full)
        dispatcher_cpu = statistics.median(r[1] for r in full)
        gateway_cpu = statistics.median(r[2] for r in full)
        await http.aclose()
        services.stop()

        print(f"tokens per stream: {tokens}, rounds: {rounds} (medians)")
        print(f"openai client alone:                   {base_rate:8.0f} tok/s  {base_cpu:6.1f} CPU µs/token")
        print(f"pool (chain, breaker, budget, redact): {pool_rate:8.0f} tok/s  {pool_cpu:6.1f} CPU µs/token")
        print(f"pool → EventPublisher → JetStream:     {pub_rate:8.0f} tok/s  {pub_cpu:6.1f} CPU µs/token")
        print(f"pool → JetStream → reader process:     {end_rate:8.0f} tok/s  ({per_event:.1f} tokens per event)")
        print(f"full: gateway → dispatcher process → events → gateway SSE → client: {full_rate:8.0f} tok/s")
        print(f"RATIO pool / openai client = {pool_rate / base_rate:.2f}x (target >= 0.5x)")
        print(
            f"RATIO pool→events / openai client = {pub_rate / base_rate:.2f}x; "
            f"→ reader process = {end_rate / base_rate:.2f}x (target >= 0.5x)"
        )
        print(f"RATIO full path (SSE client) / openai client = {full_rate / base_rate:.2f}x (target >= 0.5x)")
        print(
            f"CPU per token in this process: pool {pool_cpu:.1f} µs (openai client alone {base_cpu:.1f} µs), "
            f"pool + event publishing {pub_cpu:.1f} µs"
        )
        print(
            f"dispatcher process CPU per token (full path): {dispatcher_cpu:.1f} µs; "
            f"gateway process: {gateway_cpu:.1f} µs"
        )
        await client.close()
        await pool.aclose()
        await bus.close()
    finally:
        nats.cleanup()
        model_proc.kill()
        model_proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-coalesce", action="store_true", help="one event per model delta")
    parser.add_argument("--read", help=argparse.SUPPRESS)  # child mode: the event reader
    parser.add_argument("--nats", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        asyncio.run(reader_main(args.nats, args.prefix, args.read))
    else:
        asyncio.run(main(args.tokens, args.rounds, not args.no_coalesce))
