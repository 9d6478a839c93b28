"""SSE fan-out: many clients watching live runs on ONE gateway process, in every protocol.

Scenarios (each on fresh runs; events published straight to JetStream with `EventPublisher`
by a publisher process of its own, paced like a model's tokens — no dispatcher):
  baseline   one client on each of `--baseline-tasks` tasks (the figure the others are
             compared with), and one client on one task;
  one task   `--clients` clients on one task (default 2,000);
  many tasks `--spread` clients spread over `--tasks` tasks (default 5,000 over 50);
  /lg        `--clients` LangGraph clients joining one run's stream
             (`GET /lg/threads/{tid}/runs/{rid}/stream`, messages-tuple and values);
  /v1        `--clients` OpenAI clients each streaming a completion of its own
             (`POST /v1/chat/completions`, stream): chat completions have no way to join
             another request's run, so this is 2,000 runs, one client each;
  /v1/responses `--clients` clients streaming one response again
             (`GET /v1/responses/{id}?stream=true`, the Responses API's typed events).
Every client is attached (it has read its run's first frame) before the measured phase; then
each run gets `--events` tokens at `--rate` per second and its `status`/`done`. Every client
must receive every frame of its run in order — for the API, ids exactly the run's stream
sequences (checked against a replay read straight from JetStream); for /lg, the frame ids the
translator makes of that replay; for /v1 and /v1/responses, every token in order — else the
bench fails.

Printed per scenario: deliveries, the gateway process's CPU seconds (/proc) per delivered event
and that against the baseline's, events per write (HTTP chunks the clients got), the JetStream
consumers being read on the events stream while streaming (one per watched task), the gateway's
CPU per connected client (the HTTP request that opens a stream) and RSS, and the wall time of
the measured phase. The clients are raw asyncio streams reading `text/event-stream` (chunked
HTTP/1.1) in this process.

Run: python -m bench.sse_fanout [--clients 2000] [--tasks 50] [--spread 5000] [--events 200]
     [--rate 100] [--baseline-tasks 20]      smaller: --clients 200 --spread 500 --tasks 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.memory import rss_mb
from bench.token_path import TASK_DSL, cpu_seconds
from services.gateway.embedded import GatewayProcess, settings_env
from services.gateway.protocols.langgraph.stream import LgFrames, RunStream, modes_of
from services.gateway.runs.frames import Entry
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import EventPublisher, read_events
from shared.contract.events import DoneEvent, StatusEvent, TokenEvent
from shared.natsd import NatsServer, free_port
from shared.settings import Settings

CONNECTING = 64  # clients opening their stream at once (the rest wait their turn)
LG_MODES = ["messages-tuple", "values"]  # what the /lg clients ask for


@dataclass
class Client:
    """One SSE client: the ids of the frames it got, in order (for /v1, the tokens)."""

    task_id: str
    path: str = ""  # what it asks for (None-protocol default: the task's events)
    ids: list[Any] = field(default_factory=list)
    writes: int = 0  # HTTP chunks received after the first event: one per write of the gateway
    attached: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False


async def _open(port: int, request: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
        raise RuntimeError(f"unexpected answer: {head[:300]!r}")
    return reader, writer, head


async def _blocks(reader: asyncio.StreamReader, client: Client) -> AsyncIterator[bytes]:
    """The SSE blocks of a chunked response, until the client is done or the response ends."""
    tail = b""
    while not client.done:
        size = int((await reader.readline()).strip(), 16)  # chunked transfer coding
        if size == 0:
            return
        client.writes += client.attached.is_set()
        # The gateway's frames end lines with \n, sse-starlette's heartbeats with \r\n.
        blocks = (tail + (await reader.readexactly(size + 2))[:-2]).replace(b"\r\n", b"\n").split(b"\n\n")
        tail = blocks.pop()
        for block in blocks:
            yield block


async def watch(port: int, token: str, client: Client, gate: asyncio.Semaphore) -> None:
    """The API's SSE of a task (ids: stream sequences), or /lg's join of a run (ids: frame ids)."""
    path = client.path or f"/api/v1/tasks/{client.task_id}/events"
    async with gate:
        reader, writer, _ = await _open(port, (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
                                                ).encode())  # fmt: skip
    try:
        async for block in _blocks(reader, client):
            if not block.startswith(b"id: "):
                client.done = client.done or block.startswith(b"event: end\n")  # /lg's last frame
                continue  # heartbeat (no id) or keep-alive comment
            frame_id = block[4:block.index(b"\n")].decode()
            client.ids.append(frame_id if client.path else int(frame_id))
            client.attached.set()
            if b"\nevent: done\n" in block:
                client.done = True
    finally:
        writer.close()


async def complete(port: int, token: str, client: Client, gate: asyncio.Semaphore) -> None:
    """One streamed chat completion on a run of its own (`/v1`): its run id is learned from the
    answer's head; each content delta is a token."""
    body = json.dumps({"model": "agentix-direct", "stream": True, "messages": [{"role": "user", "content": "q"}]})
    async with gate:
        reader, writer, head = await _open(port, (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    found = re.search(rb"(?im)^x-agentix-run-id: (\S+)", head)
    assert found is not None, head
    client.task_id = found.group(1).decode()
    try:
        async for block in _blocks(reader, client):
            if not block.startswith(b"data: "):
                continue
            if block == b"data: [DONE]":
                client.done = True
                break
            delta = json.loads(block[6:])["choices"]
            if delta and "content" in delta[0]["delta"] and delta[0]["delta"]["content"]:
                client.ids.append(delta[0]["delta"]["content"])
            client.attached.set()  # the role chunk comes first
    finally:
        writer.close()


async def publish(bus: Bus, tasks: list[str], events: int, rate: float) -> None:
    """`events` tokens per task, a round over all tasks every 1/rate s, then status and done."""
    pubs = [EventPublisher(bus, t, start_n=1) for t in tasks]
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(events):
        for pub in pubs:
            await pub.emit(TokenEvent(task_id=pub.task_id, node_id="ans", text=f"token{i} "))
        await asyncio.gather(*(p.flush() for p in pubs))
        await asyncio.sleep(max(0.0, start + (i + 1) / rate - loop.time()))
    for pub in pubs:
        await pub.emit(StatusEvent(task_id=pub.task_id, status="done"))
        await pub.emit(DoneEvent(task_id=pub.task_id, status="done", output="…"))
    await asyncio.gather(*(p.flush() for p in pubs))


async def publisher_main(nats_url: str, prefix: str) -> None:
    """Child process: publish what the line on stdin says. The publisher has a process of its
    own so that its pace does not depend on how busy this process's thousands of clients are."""
    settings = Settings(nats_servers=[nats_url], subject_prefix=prefix, data_dir=Path(tempfile.mkdtemp()))
    bus = await Bus.connect(settings, name="bench-publisher")
    print("READY", flush=True)
    order = json.loads(await asyncio.to_thread(sys.stdin.readline))
    await publish(bus, order["tasks"], order["events"], order["rate"])
    print("DONE", flush=True)
    await bus.close()


class Publisher:
    """The publisher process, started and connected before the measured phase."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> Publisher:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.sse_fanout", "--publisher", self.settings.nats_servers[0],
            self.settings.subject_prefix, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stdout is not None
        if (await self.proc.stdout.readline()).strip() != b"READY":
            raise RuntimeError("the publisher did not start")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()

    async def run(self, tasks: list[str], events: int, rate: float) -> None:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"tasks": tasks, "events": events, "rate": rate}).encode() + b"\n")
        await self.proc.stdin.drain()
        if (await self.proc.stdout.readline()).strip() != b"DONE":
            raise RuntimeError("the publisher failed")
        await self.proc.wait()


async def read_response(port: int, token: str, client: Client, gate: asyncio.Semaphore) -> None:
    """One client streaming a response again (`GET /v1/responses/{id}?stream=true`): each
    `response.output_text.delta` is a token; attached once `response.created` has come."""
    async with gate:
        reader, writer, _ = await _open(port, (f"GET {client.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
                                                ).encode())  # fmt: skip
    try:
        async for block in _blocks(reader, client):
            data = next((line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")), None)
            if data is None:
                continue
            event = json.loads(data)
            if event["type"] == "response.output_text.delta":
                client.ids.append(event["delta"])
            elif event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                client.done = True
            client.attached.set()
    finally:
        writer.close()


async def started(bus: Bus, runs: list[str]) -> None:
    for run_id in runs:  # the first event: a client that has it is attached
        pub = EventPublisher(bus, run_id)
        await pub.emit(StatusEvent(task_id=run_id, status="running"))
        await pub.flush()


async def new_tasks(http: httpx.AsyncClient, bus: Bus, count: int) -> list[str]:
    tasks = []
    for _ in range(count):
        resp = await http.post("/api/v1/tasks", json={"dsl": TASK_DSL, "input": {"text": "q"}})
        resp.raise_for_status()
        tasks.append(resp.json()["id"])
    await started(bus, tasks)
    return tasks


async def new_lg_run(http: httpx.AsyncClient, bus: Bus) -> tuple[str, str]:
    """A LangGraph run on a thread of its own (its task waits in the queue: no dispatcher)."""
    thread = (await http.post("/lg/threads", json={})).json()["thread_id"]
    resp = await http.post(f"/lg/threads/{thread}/runs", json={"input": {"messages": [{"role": "user",
                                                                                     "content": "q"}]}})
    resp.raise_for_status()
    run_id: str = resp.json()["run_id"]
    await started(bus, [run_id])
    return thread, run_id


async def expected(bus: Bus, client: Client) -> list[Any]:
    """What the client must have got, from a replay of its run's log."""
    entries = [Entry(seq, event) async for seq, event in read_events(bus, client.task_id, follow=False)]
    if not client.path:
        return [e.seq for e in entries]
    if client.path.startswith("/lg/"):
        frames = LgFrames(RunStream(client.task_id, "thread", [], modes_of(LG_MODES)))
        made = frames.opening() + b"".join(frames.frames(e) for e in entries)
        return [m.decode() for m in re.findall(rb"^id: (\S+)$", made, re.M)]
    return [e.event.text for e in entries if isinstance(e.event, TokenEvent)]


@dataclass
class Result:
    name: str
    tasks: int
    clients: int
    deliveries: int
    cpu_s: float
    connect_cpu_s: float
    consumers: int
    rss_mb: float
    wall_s: float
    writes: int

    @property
    def per_event_us(self) -> float:
        return self.cpu_s / self.deliveries * 1e6


async def scenario(name: str, settings: Settings, gw: GatewayProcess, pid: int, http: httpx.AsyncClient, bus: Bus,
                   token: str, tasks: int, clients: int, events: int, rate: float,
                   protocol: str = "api") -> Result:  # fmt: skip
    gate = asyncio.Semaphore(CONNECTING)
    cpu0 = cpu_seconds(pid)
    if protocol == "lg":
        thread, run_id = await new_lg_run(http, bus)
        path = f"/lg/threads/{thread}/runs/{run_id}/stream?" + "&".join(f"stream_mode={m}" for m in LG_MODES)
        watchers = [Client(run_id, path) for _ in range(clients)]
        readers = [asyncio.create_task(watch(gw.port, token, c, gate)) for c in watchers]
    elif protocol == "responses":
        task_id = (await new_tasks(http, bus, 1))[0]
        watchers = [Client(task_id, f"/v1/responses/resp_{task_id}?stream=true") for _ in range(clients)]
        readers = [asyncio.create_task(read_response(gw.port, token, c, gate)) for c in watchers]
    elif protocol == "v1":
        watchers = [Client("", "/v1") for _ in range(clients)]
        readers = [asyncio.create_task(complete(gw.port, token, c, gate)) for c in watchers]
    else:
        task_ids = await new_tasks(http, bus, tasks)
        watchers = [Client(task_ids[i % tasks]) for i in range(clients)]
        readers = [asyncio.create_task(watch(gw.port, token, c, gate)) for c in watchers]
    attached: asyncio.Future[Any] = asyncio.gather(*(c.attached.wait() for c in watchers))
    waited: list[asyncio.Future[Any]] = [attached, *readers]
    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if not attached.done():
        attached.cancel()
        for r in readers:
            if r.done():
                r.result()  # a client failed before it was attached: say why
    run_ids = sorted({c.task_id for c in watchers})
    if protocol == "v1":
        await started(bus, run_ids)
    cpu1 = cpu_seconds(pid)
    publisher = await Publisher(settings).start()
    try:
        infos = await bus.js.consumers_info(bus.names.events_stream)
        consumers = sum(1 for c in infos if c.push_bound and any(t in (c.config.filter_subject or "") for t in run_ids))
        started_at = time.perf_counter()
        await asyncio.gather(publisher.run(run_ids, events, rate), *readers)
        wall = time.perf_counter() - started_at
    finally:
        publisher.kill()  # gone already when it finished; a failure must not leave it running
    cpu2 = cpu_seconds(pid)

    wanted = {c.task_id: await expected(bus, c) for c in {c.task_id: c for c in watchers}.values()}
    wrong = [(i, c) for i, c in enumerate(watchers) if c.ids != wanted[c.task_id] or not c.done]
    if wrong:
        i, c = wrong[0]
        log = wanted[c.task_id]
        first = next((k for k, (a, b) in enumerate(zip(c.ids, log, strict=False)) if a != b), min(len(c.ids), len(log)))
        raise AssertionError(f"{name}: {len(wrong)} clients did not get every frame in order (or no end); client "
                             f"{i} got {len(c.ids)} of {len(log)}, first difference at {first}: "
                             f"{c.ids[first:first + 3]} vs {log[first:first + 3]}")
    deliveries = sum(len(c.ids) for c in watchers)
    writes = sum(c.writes for c in watchers)
    return Result(name, len(run_ids), clients, deliveries, cpu2 - cpu1, cpu1 - cpu0, consumers, rss_mb(pid), wall,
                  writes)


def raise_open_files(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:  # the gateway process inherits it
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


async def main(args: argparse.Namespace) -> None:
    raise_open_files(max(args.clients, args.spread) * 2 + 1_000)
    server = NatsServer().start()
    settings = Settings(nats_servers=[server.url], subject_prefix="fanbench",
                        data_dir=Path(tempfile.mkdtemp(prefix="sse-fanout-")), rate_limit_per_min=100_000_000)
    gw = await GatewayProcess(settings_env(settings), free_port()).start()
    assert gw._proc is not None
    pid = gw._proc.pid
    bus = await Bus.connect(settings, name="bench")
    token = mint_token(settings, "bench")
    try:
        async with httpx.AsyncClient(base_url=gw.url, headers={"Authorization": f"Bearer {token}"},
                                     timeout=60) as http:  # fmt: skip
            each = args.baseline_tasks
            plan = [(f"1 client on each of {each} tasks", each, each, "api"),
                    ("1 client on 1 task", 1, 1, "api"),
                    (f"{args.clients:,} clients on 1 task", 1, args.clients, "api"),
                    (f"{args.spread:,} clients on {args.tasks} tasks", args.tasks, args.spread, "api"),
                    (f"/lg: {args.clients:,} clients on 1 run", 1, args.clients, "lg"),
                    (f"/v1: {args.clients:,} completions", args.clients, args.clients, "v1"),
                    (f"/v1/responses: {args.clients:,} on 1", 1, args.clients, "responses")]
            # Warm-up (first requests, first events parsed): not measured.
            await scenario("warm-up", settings, gw, pid, http, bus, token, 2, 20, args.events, args.rate)
            results = []
            for name, tasks, clients, protocol in plan:
                if args.only and protocol not in args.only:
                    continue
                result = await scenario(name, settings, gw, pid, http, bus, token, tasks, clients,
                                        args.events, args.rate, protocol)  # fmt: skip
                results.append(result)
                print(f"{name}: ok ({result.wall_s:.1f} s)", flush=True)
    finally:
        await bus.close()
        await gw.stop()
        server.cleanup()

    base = results[0].per_event_us
    print(f"\n{args.events} tokens per task at {args.rate:g}/s (+ status, done); every client got every event in order")
    print(f"{'scenario':34} {'deliveries':>10} {'CPU s':>7} {'µs/event':>9} {'vs 1 client':>11} "
          f"{'events/write':>12} {'consumers':>9} {'connect µs/client':>17} {'RSS MB':>7} {'wall s':>6}")
    for r in results:
        print(f"{r.name:34} {r.deliveries:>10,} {r.cpu_s:>7.2f} {r.per_event_us:>9.1f} "
              f"{r.per_event_us / base:>10.2f}x {r.deliveries / r.writes:>12.1f} {r.consumers:>9} "
              f"{r.connect_cpu_s / r.clients * 1e6:>17,.0f} {r.rss_mb:>7.0f} {r.wall_s:>6.1f}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--publisher":
        asyncio.run(publisher_main(sys.argv[2], sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=2_000, help="clients on the one task")
    parser.add_argument("--tasks", type=int, default=50, help="tasks of the spread scenario")
    parser.add_argument("--spread", type=int, default=5_000, help="clients spread over --tasks")
    parser.add_argument("--events", type=int, default=200, help="tokens per task")
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second per task")
    parser.add_argument("--baseline-tasks", type=int, default=20, help="tasks of the one-client-each baseline")
    parser.add_argument("--only", nargs="*", choices=["api", "lg", "v1", "responses"],
                        help="these protocols' scenarios only")
    asyncio.run(main(parser.parse_args()))
