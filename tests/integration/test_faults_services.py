"""Faults of the services around the dispatcher, with real processes: an ingest worker SIGKILLed
mid-document (its job is taken over by the other replica within two heartbeat intervals, with
no duplicate chunk); a tools replica SIGKILLed mid-call (the call fails clearly as `timeout`, the
task ends `failed` with it, and the next call is served by the other replica); a gateway
SIGKILLed while a client streams a task (the client resumes on the other gateway replica with
`Last-Event-ID`, with no gap and no duplicate)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.aio.subscription import Subscription

from services.gateway.migrate import upgrade
from services.tools_py.tools.parse import DocParseArgs, doc_parse
from shared.auth_tokens import mint_token
from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolContext, ToolRegistry, serve_tools
from shared.contract.heartbeat import Heartbeat
from shared.contract.task import TaskMessage
from shared.natsd import free_port
from tests.conftest import make_settings
from tests.integration.test_ingest_worker import big_document, chunk_rows
from tests.integration.test_tools_support import Process, Rows, Tools, connected, service_env
from tests.support import faults
from tests.support import openai_server as oai
from tests.support.dispatcher import dispatcher
from tests.support.nats_server import NatsServer

pytestmark = pytest.mark.chaos
HEARTBEAT_S = 2.0  # leases of 3 s (1.5 heartbeats)


async def _holder(sub: Subscription, busy: str, timeout_s: float = 120.0) -> int:
    """The pid of the instance whose heartbeat (on `sub`) says `busy` (a key of its detail whose
    `inflight` is positive)."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=timeout_s)).data)
                if (beat.detail.get(busy) or {}).get("inflight", 0) > 0:
                    return int(beat.instance.split("-")[-2])
    finally:
        await sub.unsubscribe()


async def _alive(bus: Bus, service: str, pids: set[int], timeout_s: float = 60.0) -> None:
    seen: set[int] = set()
    sub = await bus.nc.subscribe(bus.subjects.heartbeat(service, "*"))
    try:
        async with asyncio.timeout(timeout_s):
            while not pids <= seen:
                beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=timeout_s)).data)
                seen.add(int(beat.instance.split("-")[-2]))
    finally:
        await sub.unsubscribe()


async def held_parser(bus: Bus) -> tuple[asyncio.Event, asyncio.Event, Any]:
    """tools_py's `doc_parse`, served by the test: each call waits for `release` (after setting
    `entered`), so the job that asked is held by its ingest worker as long as the test needs."""
    entered, release = asyncio.Event(), asyncio.Event()
    registry = ToolRegistry("py")

    @registry.tool(name="doc_parse", title="Parse a document", description="doc_parse, held by the test.")
    async def held_parse(args: DocParseArgs, ctx: ToolContext) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return await doc_parse(args, ctx)

    return entered, release, await serve_tools(bus, registry)


async def test_a_killed_ingest_workers_job_is_taken_over_within_two_heartbeats(
        nats_server: NatsServer, tmp_path: Path) -> None:
    cfg = make_settings(nats_server.url, tmp_path / "data", heartbeat_interval_s=HEARTBEAT_S, ingest_ack_wait_s=0.0,
                        ingest_max_deliver=5)
    assert cfg.ingest_ack_wait_s == 1.5 * HEARTBEAT_S
    env = service_env(cfg, AGENTIX_KB_EMBED_BATCH="4", AGENTIX_KB_CHUNK_SIZE="200", AGENTIX_KB_CHUNK_OVERLAP="40")
    async with connected(cfg) as bus:
        parsing, release_parse, parser = await held_parser(bus)
        workers = [Process("services.tools_go_equiv", env, tmp_path / f"go-{i}.log").start() for i in (1, 2)]
        rows = Rows(cfg.db_url("tools"))
        try:
            tools = Tools(bus)
            await tools.ready(timeout_s=120)  # two processes starting on a busy machine
            await _alive(bus, "tools-go", {w.pid for w in workers})
            await tools("kb_create", name="crash")
            await tools("kb_create", name="clean")
            text = big_document(2000)  # long enough to be killed mid-index
            job = await tools("kb_ingest", kb="crash", text=text, title="Manual")
            async with asyncio.timeout(120):
                await parsing.wait()
            # The only job is held in its parse: the worker whose heartbeat counts one holds it.
            beats = await bus.nc.subscribe(bus.subjects.heartbeat("tools-go", "*"))
            holder = await _holder(beats, "ingest")
            release_parse.set()
            victim = next(w for w in workers if w.pid == holder)
            async for _, event in read_events(bus, job["job_id"], follow=True, idle_timeout_s=30):
                assert event.type != "done", "the job ended before its worker could be killed"
                if event.type == "progress" and event.stage == "index" and event.done >= 24:
                    break
            victim.kill()  # SIGKILL: no drain, no nak, a transaction may be half written
            before = [seq async for seq, _ in read_events(bus, job["job_id"], follow=False)]  # all the victim sent
            resumed = False
            async for _, event in read_events(bus, job["job_id"], after_seq=before[-1], follow=True, idle_timeout_s=60):
                if event.type == "progress":
                    resumed = True  # the first event after the kill is the new owner's
                if event.type == "done":
                    assert event.status == "done", event
                    break
            assert resumed  # how soon after the kill: bench/failover.py measures takeovers
            lease = (await bus.js.consumer_info(bus.names.ingest_stream, bus.names.ingest_consumer)).config.ack_wait
            assert lease is not None and lease <= 2 * HEARTBEAT_S, lease

            clean = await tools("kb_ingest", kb="clean", text=text, title="Manual")
            assert (await tools.wait_job(clean["job_id"], timeout_s=120)).status == "done"
            crashed, reference = chunk_rows(rows, job["document_id"]), chunk_rows(rows, clean["document_id"])
            assert crashed == reference and [p for p, _, _ in crashed] == list(range(len(reference)))
        finally:
            release_parse.set()
            rows.close()
            for worker in workers:
                if worker.proc is not None and worker.proc.poll() is None:
                    worker.terminate()
            await parser.drain()


def _gateway(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen([sys.executable, "-m", "services.gateway", "--port", str(port)], env=env,
                            stdout=out, stderr=out)


async def _ready(url: str, timeout_s: float = 120.0) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=5) as client:
        async with asyncio.timeout(timeout_s):
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/ready")).status_code == 200:
                        return
                await asyncio.sleep(0.2)


def _frames(lines: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """(id, data with its `type`) of each complete SSE frame in `lines`."""
    frames: list[tuple[int, dict[str, Any]]] = []
    seq, kind = None, None
    for line in lines:
        if line.startswith("id:"):
            seq = int(line[3:].strip())
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:") and seq is not None:
            frames.append((seq, {**json.loads(line[5:].strip()), "type": kind}))
            seq, kind = None, None
    return frames


async def test_a_client_resumes_on_another_gateway_after_its_gateway_is_killed(
        nats_server: NatsServer, fresh_pg: str, tmp_path: Path) -> None:
    """Two gateway processes on one database; the client streams a task's events from the first,
    which is SIGKILLed mid-stream; it reconnects to the second with `Last-Event-ID` and gets the
    rest: together, every event once (`n` 1..N), as the log has them, the tokens once each."""
    srv = oai.OpenAIServer().start_in_thread()
    cfg = make_settings(nats_server.url, tmp_path / "data", gateway_db_url=fresh_pg, jwt_secret="chaos-" + "x" * 32)
    upgrade(cfg)
    ports = [free_port(), free_port()]
    env = service_env(cfg, AGENTIX_GATEWAY_DB_URL=fresh_pg, AGENTIX_JWT_SECRET=cfg.jwt_secret or "",
                      AGENTIX_RATE_LIMIT_PER_MIN="100000")
    gateways: list[subprocess.Popen[bytes]] = []
    try:
        faults.script_slow_model(srv, delay_s=0.12)
        async with connected(cfg) as bus, dispatcher(cfg):
            tools = [await serve_tools(bus, ToolRegistry("go")), await serve_tools(bus, ToolRegistry("py"))]
            await faults.use_model_server(bus, srv)
            gateways = [_gateway(env, port, tmp_path / f"gateway{i}.log") for i, port in enumerate(ports)]
            urls = [f"http://127.0.0.1:{port}" for port in ports]
            for url in urls:
                await _ready(url)
            headers = {"Authorization": f"Bearer {mint_token(cfg, 'alice')}"}
            async with httpx.AsyncClient(headers=headers, timeout=60) as client:
                posted = await client.post(f"{urls[0]}/api/v1/tasks", json={"dsl": faults.DSL, "input": {"q": "gw"}})
                assert posted.status_code == 202, posted.text
                task_id = posted.json()["id"]
                lines: list[str] = []
                with contextlib.suppress(httpx.HTTPError):
                    async with client.stream("GET", f"{urls[0]}/api/v1/tasks/{task_id}/events") as first:
                        async for line in first.aiter_lines():
                            lines.append(line)
                            if sum(1 for _, d in _frames(lines) if d.get("type") == "token") == 3 and not line:
                                gateways[0].send_signal(signal.SIGKILL)  # mid-stream, between two frames
                before = _frames(lines)
                assert before and before[-1][1]["type"] != "done", "the first gateway was not killed mid-stream"
                more: list[str] = []
                resume = {"Last-Event-ID": str(before[-1][0])}
                async with client.stream("GET", f"{urls[1]}/api/v1/tasks/{task_id}/events", headers=resume) as second:
                    async for line in second.aiter_lines():
                        more.append(line)
                after = _frames(more)
            seen = before + after
            assert [d["n"] for _, d in seen] == list(range(1, len(seen) + 1)), "a gap or a repeat"
            assert seen[-1][1]["type"] == "done" and seen[-1][1]["status"] == "done", seen[-1]
            replay = [(seq, e.n) async for seq, e in read_events(bus, task_id, follow=False)]
            assert [(seq, d["n"]) for seq, d in seen] == replay
            for node in ("a1", "a2"):
                text = "".join(d["text"] for _, d in seen if d["type"] == "token" and d.get("node_id") == node)
                assert text == faults.ANSWER, (node, text)
            for server in tools:
                await server.drain()
    finally:
        for proc in gateways:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        srv.stop_thread()


# Long enough for a heartbeat to show the call in flight (its replica is killed then).
SLOW_CODE = {"code": "import time\ntime.sleep(6)\nprint('slept')", "timeout_s": 30}
# The next call, made once the cut-off one has timed out: it ends well inside the tool timeout.
QUICK_CODE = {"code": "print('ran')", "timeout_s": 30}


def tool_dsl(args: dict[str, Any]) -> dict[str, Any]:
    return {"version": "1",
            "nodes": [{"id": "in", "kind": "input"},
                      {"id": "run", "kind": "tool", "config": {"tool": "code_exec", "args": args}},
                      {"id": "out", "kind": "output", "config": {"value": "{{ run.stdout }}"}}],
            "edges": [{"source": "in", "target": "run"}, {"source": "run", "target": "out"}]}


async def _run_task(bus: Bus, task_id: str, args: dict[str, Any]) -> list[Any]:
    message = TaskMessage(task_id=task_id, user_id="u1", dsl=tool_dsl(args), input={})
    await bus.js_publish(bus.subjects.tasks_submit, message, msg_id=task_id)
    return [e async for _, e in read_events(bus, task_id, follow=True, idle_timeout_s=120)]


async def test_a_tools_replica_killed_mid_call_fails_the_call_clearly_and_the_other_serves(
        nats_server: NatsServer, tmp_path: Path) -> None:
    """A call in flight in a SIGKILLed replica is not answered: it fails as `timeout` after the
    tool timeout (it is not sent again to another replica: the tool may have had effects, and a
    dead replica looks like a slow tool), and the task ends `failed` saying so — a retry resumes
    it. The next call goes to the live replica."""
    cfg = make_settings(nats_server.url, tmp_path / "data", tool_timeout_s=8.0)
    env = service_env(cfg)
    async with connected(cfg) as bus:
        go = await serve_tools(bus, ToolRegistry("go"))  # answers list_tools; this test needs no go tool
        replicas = [Process("services.tools_py", env, tmp_path / f"py-{i}.log").start() for i in (1, 2)]
        try:
            await Tools(bus).ready(("py",), timeout_s=120)
            await _alive(bus, "tools-py", {r.pid for r in replicas})
            async with dispatcher(cfg):
                cut = asyncio.create_task(_run_task(bus, "cut-off", SLOW_CODE))
                holder = await _busy(bus, "tools-py")
                victim = next(r for r in replicas if r.pid == holder)
                victim.kill()
                events = await cut
                last = events[-1]
                assert last.type == "done" and last.status == "failed", last
                assert "timeout" in (last.error or "") and "code_exec" in (last.error or ""), last.error
                [result] = [e for e in events if e.type == "tool.result"]
                assert not result.ok and (result.error or "").startswith("timeout:"), result

                after = await _run_task(bus, "after", QUICK_CODE)
                assert after[-1].status == "done", after[-1]
                assert after[-1].output == {"out": "ran\n"}, after[-1].output
        finally:
            for replica in replicas:
                if replica.proc is not None and replica.proc.poll() is None:
                    replica.terminate()
            await go.drain()


async def _busy(bus: Bus, service: str, timeout_s: float = 60.0) -> int:
    """The pid of the `service` instance whose heartbeat reports work in flight."""
    sub = await bus.nc.subscribe(bus.subjects.heartbeat(service, "*"))
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=timeout_s)).data)
                if beat.load.inflight > 0:
                    return int(beat.instance.split("-")[-2])
    finally:
        await sub.unsubscribe()
