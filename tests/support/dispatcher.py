"""Dispatchers for tests: one in the test's own event loop (stopped, drained, when the block
ends) or one as its own process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from services.dispatcher.main import run as run_dispatcher
from shared.bus import Bus
from shared.contract.heartbeat import Heartbeat
from shared.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def dispatcher(settings: Settings, stop_timeout_s: float = 60.0) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(run_dispatcher(settings, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, stop_timeout_s)


def dispatcher_process(settings: Settings, log: Path, **extra_env: str) -> subprocess.Popen[bytes]:
    """A dispatcher as its own process (so a test can SIGKILL it), on the test's deployment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTIX_")}
    env.update({
        "AGENTIX_NATS_SERVERS": ",".join(settings.nats_servers),
        "AGENTIX_SUBJECT_PREFIX": settings.subject_prefix,
        "AGENTIX_DATA_DIR": str(settings.data_dir),
        "AGENTIX_TASK_ACK_WAIT_S": str(settings.task_ack_wait_s),
        "AGENTIX_TASK_MAX_DELIVER": str(settings.task_max_deliver),
        "AGENTIX_HEARTBEAT_INTERVAL_S": str(settings.heartbeat_interval_s),
        "PYTHONPATH": str(ROOT),
        **extra_env,
    })  # fmt: skip
    return subprocess.Popen([sys.executable, "-m", "services.dispatcher"], cwd=ROOT, env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)  # fmt: skip


async def chain_applied(bus: Bus, revision: int, timeout_s: float = 60.0) -> None:
    """Until a dispatcher heartbeat says new tasks run with model chain `revision`."""
    sub = await bus.nc.subscribe(bus.subjects.heartbeat("dispatcher", "*"))
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                beat = Heartbeat.model_validate_json((await sub.next_msg(timeout=timeout_s)).data)
                if beat.detail.get("chain_revision") == revision:
                    return
    finally:
        await sub.unsubscribe()
