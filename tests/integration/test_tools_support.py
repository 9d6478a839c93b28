"""Helpers shared by the tool-service tests (no tests here): the two tool services run in this
process or as real child processes, a tool caller, the labelled corpus, and DB row counts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

import services.tools_go_equiv.main as go_main
import services.tools_py.main as py_main
from services.gateway.embedded import EmbeddedGateway
from shared.bus import Bus
from shared.bus.events import read_events
from shared.bus.tools import ToolClient
from shared.contract.events import DoneEvent
from shared.contract.tools import ToolMeta
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "kb_corpus"
TABLES_BY_KB = ("kb_documents", "kb_chunks", "kb_embeddings", "kb_facts", "kb_ingest_jobs")


class ToolError(AssertionError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class Tools:
    """Calls tools over NATS as a given user."""

    bus: Bus
    client: ToolClient = field(init=False)

    def __post_init__(self) -> None:
        self.client = ToolClient(self.bus)

    async def reply(self, tool: str, user: str = "alice", wait_s: float = 30, **args: Any) -> Any:
        return await self.client.call(tool, args, ToolMeta(user_id=user), timeout_s=wait_s)

    async def __call__(self, tool: str, user: str = "alice", wait_s: float = 30, **args: Any) -> Any:
        reply = await self.reply(tool, user, wait_s, **args)
        if not reply.ok:
            raise ToolError(reply.error.code, reply.error.message)
        return reply.result

    async def wait_job(self, job_id: str, timeout_s: float = 60) -> DoneEvent:
        async def last() -> DoneEvent:
            async for _, event in read_events(self.bus, job_id, follow=True, idle_timeout_s=timeout_s):
                if event.type == "done":
                    return event  # type: ignore[return-value]
            raise AssertionError("event log ended without done")

        return await asyncio.wait_for(last(), timeout_s)

    async def ready(self, services: tuple[str, ...] = ("go", "py"), timeout_s: float = 30) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            found = {d.service for d in await self.client.list_tools(timeout_s=1)}
            if set(services) <= found:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"tool services {services} not up (found {found})")
            await asyncio.sleep(0.1)


SHUTDOWN_S = 60.0  # the ingestion worker's own grace for running batches is 25 s


class InProcess:
    """tools_py and tools_go_equiv `run()` as tasks of the test's event loop."""

    def __init__(self, settings: Settings, go: bool = True, py: bool = True) -> None:
        self.settings, self.go, self.py = settings, go, py
        self.stops: list[tuple[asyncio.Event, asyncio.Task[Any]]] = []

    async def start(self) -> InProcess:
        if self.py:
            stop = asyncio.Event()
            self.stops.append((stop, asyncio.create_task(py_main.run(self.settings, stop))))
        if self.go:
            stop = asyncio.Event()
            self.stops.append((stop, asyncio.create_task(go_main.run(self.settings, stop))))
        return self

    async def stop(self) -> None:
        """tools_go_equiv first (its ingestion worker may still be calling doc_parse). A service
        that does not stop fails the test here, by name, rather than at the suite's timeout."""
        for stop, task in reversed(self.stops):
            stop.set()
            done, _ = await asyncio.wait([task], timeout=SHUTDOWN_S)
            assert done, f"{task.get_coro()} did not stop within {SHUTDOWN_S} s"
            task.result()


def service_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")}
    env.update(
        {
            "AGENTIX_NATS_SERVERS": ",".join(settings.nats_servers),
            "AGENTIX_SUBJECT_PREFIX": settings.subject_prefix,
            "AGENTIX_DATA_DIR": str(settings.data_dir),
            "AGENTIX_HEARTBEAT_INTERVAL_S": str(settings.heartbeat_interval_s),
            "AGENTIX_INGEST_ACK_WAIT_S": str(settings.ingest_ack_wait_s),
            "AGENTIX_INGEST_MAX_DELIVER": str(settings.ingest_max_deliver),
            "AGENTIX_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if settings.tools_db_url:
        env["AGENTIX_TOOLS_DB_URL"] = settings.tools_db_url
    env.update(extra)
    return env


class Process:
    """A tool service as a child process, started the way `agentix up` starts it."""

    def __init__(self, module: str, env: dict[str, str], log: Path) -> None:
        self.module, self.env, self.log_path = module, env, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", self.module], env=self.env, stdout=log, stderr=log)
        log.close()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout_s: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def corpus_docs() -> list[Path]:
    return sorted((CORPUS / "docs").glob("*.md"))


def corpus_doc(stem: str) -> Path:
    return CORPUS / "docs" / f"{stem}.md"


def corpus_queries() -> list[dict[str, Any]]:
    return json.loads((CORPUS / "queries.json").read_text())["queries"]


async def ingest_corpus(tools: Tools, kb: str, user: str = "alice") -> dict[str, str]:
    """Ingest every corpus document; returns internal document id → file stem."""
    jobs = []
    for path in corpus_docs():
        out = await tools("kb_ingest", user, kb=kb, text=path.read_text(), filename=path.name)
        jobs.append(out["job_id"])
    for job in jobs:
        done = await tools.wait_job(job)
        assert done.status == "done", done
    listing = await tools("doc_list", user, kb=kb, limit=200)
    return {d["id"]: d["filename"].rsplit(".", 1)[0] for d in listing["items"]}


class Rows:
    """Direct reads of the tools database, for checks no tool exposes (orphans, duplicates)."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def all(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params).all())

    def count_for_kb(self, kb_id: str) -> dict[str, int]:
        counts = {t: int(self.scalar(f"SELECT COUNT(*) FROM {t} WHERE kb_id = :kb", kb=kb_id)) for t in TABLES_BY_KB}
        counts["kb_bases"] = int(self.scalar("SELECT COUNT(*) FROM kb_bases WHERE id = :kb", kb=kb_id))
        return counts

    def fts_orphans(self) -> int:
        """Full-text rows whose chunk is gone (SQLite's FTS table has no foreign key)."""
        if not str(self.engine.url).startswith("sqlite"):
            return 0
        return int(self.scalar("SELECT COUNT(*) FROM kb_chunks_fts WHERE rowid NOT IN (SELECT id FROM kb_chunks)"))

    def close(self) -> None:
        self.engine.dispose()


@contextlib.asynccontextmanager
async def connected(settings: Settings, declare: bool = True) -> Any:
    bus = await Bus.connect(settings, name="test-tools")
    if declare:
        await bus.declare()
    try:
        yield bus
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def tools_and_gateway(settings: Settings) -> Any:
    """Both tool services in-process and a gateway (rate limit out of the way), tools answering;
    yields (settings used, bus, tools, the gateway's API base URL)."""
    cfg = settings.model_copy(update={"rate_limit_per_min": 100_000})
    async with connected(cfg) as bus:
        services = await InProcess(cfg).start()
        gateway = await EmbeddedGateway(cfg).start()
        try:
            tools = Tools(bus)
            await tools.ready()
            yield cfg, bus, tools, f"{gateway.url}/api/v1"
        finally:
            await gateway.stop()
            await services.stop()
