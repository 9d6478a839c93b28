"""Chat runs over the real processes (gateway and dispatcher as `python -m services.…`, the scripted
OpenAI-protocol server in its own process; it echoes the user's last message):

(a) time to first token of a chat run — `POST /conversations/{id}/messages` until the first
    `token` event on `GET /runs/{id}/events` — against the bare `openai` client's time to first
    content chunk from the same server, samples interleaved. Prints the median ratio (target
    ≤ 1.5×) and where the chat's time goes, from the events' publish times (same clock):
    the POST (auth, guardrail, records, publish), the dispatcher's pickup (work queue → `running`),
    running → first token published (compile, model call), and the token's way to the client
    (JetStream → gateway SSE).
    The same graph submitted as a plain task (`POST /tasks`) is timed alongside: the difference
    is what the chat layer adds.
(b) N conversations × M turns at once, each conversation's turns posted back to back (they queue
    behind one another): every run must end `done`, and each conversation's messages must be
    user/assistant pairs in the order posted, each answer the echo of its own question. Prints
    throughput and every failure.

    (a) runs twice: with a model server that answers at once (the ratio is then Agentix's own
    overhead against one loopback HTTP call: far above 1.5×, see the phases) and with one that
    waits `--model-ttft-ms` (300 ms, a typical hosted model's time to first token) before its first
    chunk, for both the chat and the bare client — the ratio a user of a real model sees.

Run: python -m bench.chat [--samples 20] [--conversations 50] [--turns 4] [--postgres URL] [--model-ttft-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import openai

from agentix.sse import parse_stream
from bench.token_path import Services, cpu_seconds, start_model_server
from services.gateway.chat.modes import graph_for
from services.gateway.chat.states import RUN_TERMINAL
from shared.auth_tokens import mint_token
from shared.natsd import NatsServer
from tests.support.openai_server import ScriptClient, reply

RUN_WAIT_S = 300.0
QUESTION = "How fast is the first token?"


@dataclass
class Timeline:
    """One chat sample, in seconds of the wall clock (the events carry publish times)."""

    posted: float  # before the POST
    accepted: float  # its 202 arrived
    opened: float  # the run's event stream answered (headers)
    running: float  # the dispatcher's `running` status was published
    token_published: float
    token_seen: float  # the client read the first token

    @property
    def ttft(self) -> float:
        return self.token_seen - self.posted


@dataclass
class Outcome:
    turns: int = 0
    failures: list[str] = field(default_factory=list)
    running: list[float] = field(default_factory=list)  # `running` published → `done` published, per run
    handoff: list[float] = field(default_factory=list)  # a run's `done` → the next run's `running`


def event_time(data: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(data["ts"]).replace("Z", "+00:00")).timestamp()


async def sse_events(http: httpx.AsyncClient, url: str, headers: dict[str, str], *, method: str = "GET",
                     body: Any = None) -> AsyncIterator[tuple[str, Any]]:
    """(event name, data) of a run's stream as each frame completes, until `done`; first
    ("open", {"at": time}) when the response headers arrive. `method` and `body`: a stream
    that a POST answers (`POST /tasks/stream`)."""
    async with http.stream(method, url, headers=headers, json=body) as resp:
        resp.raise_for_status()
        yield "open", {"at": time.time()}
        frame: list[str] = []
        async for line in resp.aiter_lines():
            frame.append(line)
            if line:
                continue
            for event in parse_stream(iter(frame)):
                yield event.event, event.data
                if event.event == "done":
                    return
            frame = []


class ChatClient:
    def __init__(self, services: Services, http: httpx.AsyncClient) -> None:
        self.services, self.http = services, http

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {mint_token(self.services.settings, user)}"}

    async def conversation(self, headers: dict[str, str]) -> str:
        resp = await self.http.post(f"{self.services.url}/api/v1/conversations", json={"mode": "direct"},
                                    headers=headers)
        resp.raise_for_status()
        return str(resp.json()["id"])

    async def post(self, headers: dict[str, str], conversation: str, text: str) -> str:
        resp = await self.http.post(f"{self.services.url}/api/v1/conversations/{conversation}/messages",
                                    json={"text": text}, headers=headers)
        resp.raise_for_status()
        return str(resp.json()["run"]["id"])

    def events(self, headers: dict[str, str], run_id: str) -> AsyncIterator[tuple[str, Any]]:
        return sse_events(self.http, f"{self.services.url}/api/v1/runs/{run_id}/events", headers)

    async def first_token(self, headers: dict[str, str]) -> Timeline:
        conversation = await self.conversation(headers)  # not timed: the user opened the chat earlier
        posted = time.time()
        run_id = await self.post(headers, conversation, QUESTION)
        return await self.follow_first_token(headers, f"/api/v1/runs/{run_id}/events", posted)

    async def task_first_token(self, headers: dict[str, str]) -> Timeline:
        """The same graph submitted as a plain task: what the chat layer adds is the difference."""
        posted = time.time()
        resp = await self.http.post(f"{self.services.url}/api/v1/tasks", headers=headers, json={
            "dsl": graph_for("direct"), "input": {"text": QUESTION, "history": []}})
        resp.raise_for_status()
        return await self.follow_first_token(headers, f"/api/v1/tasks/{resp.json()['id']}/events", posted)

    async def follow_first_token(self, headers: dict[str, str], path: str, posted: float) -> Timeline:
        accepted = time.time()
        opened = running = token_published = token_seen = 0.0
        async for name, data in sse_events(self.http, f"{self.services.url}{path}", headers):
            if name == "open":
                opened = data["at"]
            elif name == "status" and data.get("status") == "running" and not running:
                running = event_time(data)
            elif name == "token" and not token_seen:
                token_seen, token_published = time.time(), event_time(data)
            elif name == "done" and data.get("status") != "done":
                raise RuntimeError(f"{path} ended {data}")
        if not token_seen:
            raise RuntimeError(f"{path} streamed no token")
        return Timeline(posted, accepted, opened, running, token_published, token_seen)

    async def converse(self, index: int, turns: int, outcome: Outcome) -> None:
        """One user's conversation: `turns` messages posted back to back, every answer followed."""
        headers = self.headers(f"bench{index}")
        conversation = await self.conversation(headers)
        questions = [f"conversation {index}, turn {turn}" for turn in range(1, turns + 1)]
        runs = [await self.post(headers, conversation, question) for question in questions]
        previous_done = 0.0
        for turn, run_id in enumerate(runs, 1):
            started = 0.0
            async for name, data in self.events(headers, run_id):
                if name == "status" and data.get("status") == "running" and not started:
                    started = event_time(data)
                    if previous_done:
                        outcome.handoff.append(started - previous_done)
                if name == "done":
                    previous_done = event_time(data)
                    if started:
                        outcome.running.append(previous_done - started)
                    if data.get("status") != "done":
                        outcome.failures.append(f"conversation {index} turn {turn}: run ended "
                                                f"{data.get('status')} {data.get('error') or ''}")
        await self.check_thread(headers, conversation, runs[-1], index, questions, outcome)

    async def check_thread(self, headers: dict[str, str], conversation: str, last_run: str, index: int,
                           questions: list[str], outcome: Outcome) -> None:
        # The recorder writes an answer as its run ends, a moment after the stream said `done`.
        deadline = time.monotonic() + RUN_WAIT_S
        while time.monotonic() < deadline:
            resp = await self.http.get(f"{self.services.url}/api/v1/runs/{last_run}", headers=headers)
            resp.raise_for_status()
            if resp.json()["state"] in RUN_TERMINAL:
                break
            await asyncio.sleep(0.5)
        resp = await self.http.get(f"{self.services.url}/api/v1/conversations/{conversation}/messages",
                                   params={"limit": 200}, headers=headers)
        resp.raise_for_status()
        got = [(m["role"], m["content"]) for m in resp.json()["items"]]
        expected = [m for q in questions for m in (("user", q), ("assistant", f"echo: {q}"))]
        if got == expected:
            outcome.turns += len(questions)
        else:
            outcome.failures.append(f"conversation {index}: messages {got} (expected {expected})")


async def bare_first_token(client: openai.AsyncOpenAI) -> float:
    t0 = time.time()
    first = 0.0
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": QUESTION}], stream=True)
    async for chunk in stream:
        if not first and chunk.choices and chunk.choices[0].delta.content:
            first = time.time() - t0
    return first


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


async def first_token_bench(chat: ChatClient, model_url: str, samples: int, model_ttft_s: float = 0.0) -> None:
    """With `model_ttft_s`, the model server waits that long before its first chunk (as a hosted
    model does); without it, it answers at once, so the ratio is Agentix's overhead alone."""
    server = ScriptClient(model_url)
    if model_ttft_s:
        server.script([], then=reply("A streamed answer to the question.", first_delay_s=model_ttft_s))
    client = openai.AsyncOpenAI(base_url=model_url, api_key="x", max_retries=0)
    headers = chat.headers("bench-ttft")
    for _ in range(2):  # warm up connections, imports, the dispatcher's tool list and prepared statements
        await bare_first_token(client)
        await chat.first_token(headers)
        await chat.task_first_token(headers)
    bare: list[float] = []
    timelines: list[Timeline] = []
    tasks: list[Timeline] = []
    for _ in range(samples):
        bare.append(await bare_first_token(client))
        timelines.append(await chat.first_token(headers))
        tasks.append(await chat.task_first_token(headers))
    await client.close()
    server.reset()  # back to echoing, for the conversations
    base = statistics.median(bare)
    ttft = statistics.median(t.ttft for t in timelines)
    model = f"a model with {model_ttft_s * 1000:.0f} ms to its first token" if model_ttft_s else "an instant model"
    print(f"(a) time to first token, {samples} interleaved samples (medians), {model}")
    print(f"    openai client alone:                          {ms(base)}")
    print(f"    chat: POST message → first token on the SSE:  {ms(ttft)}")
    print(f"    the same graph as a plain task (POST /tasks): {ms(statistics.median(t.ttft for t in tasks))}")
    phases = (  # from the POST: the client's path, and the run's beside it
        ("POST …/messages answered (auth, records, publish)", lambda t: t.accepted - t.posted),
        ("run's event stream open (GET answered)", lambda t: t.opened - t.posted),
        ("`running` published (work queue pickup, load)", lambda t: t.running - t.posted),
        ("first token published (compile, model call)", lambda t: t.token_published - t.posted),
        ("first token read by the client (JetStream → SSE)", lambda t: t.token_seen - t.posted),
    )
    for label, phase in phases:
        print(f"      {label:52s} {ms(statistics.median(phase(t) for t in timelines))}")
    print(f"RATIO chat time to first token / openai client = {ttft / base:.2f}x (target <= 1.5x)")


async def conversations_bench(chat: ChatClient, conversations: int, turns: int) -> None:
    outcome = Outcome()
    procs = chat.services.procs
    cpu0 = {name: cpu_seconds(proc.pid) for name, proc in procs.items()}
    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(asyncio.wait_for(chat.converse(i, turns, outcome), RUN_WAIT_S) for i in range(conversations)),
        return_exceptions=True)
    wall = time.perf_counter() - t0
    cpu = {name: cpu_seconds(proc.pid) - cpu0[name] for name, proc in procs.items()}
    for index, result in enumerate(results):
        if isinstance(result, BaseException):
            outcome.failures.append(f"conversation {index}: {type(result).__name__}: {result}")
    total = conversations * turns
    print(f"(b) {conversations} conversations × {turns} turns at once: {outcome.turns}/{total} turns answered "
          f"in order in {wall:.1f} s — {outcome.turns / wall:.1f} turns/s")
    if outcome.running and outcome.handoff:
        print(f"    per run (medians): running → done {ms(statistics.median(outcome.running))}; "
              f"a run's done → the next run of its conversation running {ms(statistics.median(outcome.handoff))}")
    print("    CPU per turn: " + ", ".join(f"{name} {seconds / total * 1000:.0f} ms" for name, seconds in cpu.items()))
    for failure in outcome.failures[:20]:
        print(f"    FAILED {failure[:300]}")
    if len(outcome.failures) > 20:
        print(f"    … and {len(outcome.failures) - 20} more failures")


@contextlib.contextmanager
def gateway_database(postgres: str | None) -> Iterator[str | None]:
    """A throwaway PostgreSQL database on the server `postgres` (None: the embedded SQLite)."""
    if not postgres:
        yield None
        return
    import psycopg

    name = f"agentix_bench_{uuid.uuid4().hex[:8]}"
    plain = postgres.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{plain.split('://', 1)[1].rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def main(samples: int, conversations: int, turns: int, postgres: str | None, model_ttft_ms: list[float]) -> None:
    model_proc, model_url = start_model_server()
    nats = NatsServer().start()
    services = Services(nats.url, model_url)
    services.env["AGENTIX_RATE_LIMIT_PER_MIN"] = "1000000"  # a benchmark, not a rate-limit test
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(model_proc.wait)
        cleanup.callback(model_proc.kill)
        cleanup.callback(nats.cleanup)
        database = cleanup.enter_context(gateway_database(postgres))
        if database:
            services.env["AGENTIX_GATEWAY_DB_URL"] = database
        print(f"gateway database: {'PostgreSQL' if database else 'SQLite (embedded)'}")
        await run_benches(services, model_url, samples, conversations, turns, model_ttft_ms)


async def run_benches(services: Services, model_url: str, samples: int, conversations: int, turns: int,
                      model_ttft_ms: list[float]) -> None:
    try:
        services.start()
        # Idle connections are dropped before the gateway's keep-alive timeout (uvicorn: 5 s) would
        # close them under a request reusing one ("Server disconnected without sending a response").
        limits = httpx.Limits(max_connections=conversations * 4 + 20, max_keepalive_connections=conversations + 20,
                              keepalive_expiry=3.0)
        async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=RUN_WAIT_S), limits=limits) as http:
            chat = ChatClient(services, http)
            await first_token_bench(chat, model_url, samples)
            for ttft_ms in model_ttft_ms:
                await first_token_bench(chat, model_url, samples, ttft_ms / 1000)
            await conversations_bench(chat, conversations, turns)
    finally:
        services.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--postgres", metavar="URL", default=None,
                        help="run the gateway on a throwaway database of this PostgreSQL server (default: SQLite)")
    parser.add_argument("--model-ttft-ms", type=float, nargs="*", default=[300.0],
                        help="(a) again with a model that takes this long to its first token (default: 300, "
                             "a typical hosted model); the first (a) is always with an instant model")
    args = parser.parse_args()
    asyncio.run(main(args.samples, args.conversations, args.turns, args.postgres, args.model_ttft_ms))
