"""Run the gateway inside the current asyncio loop on a free port (tests and benchmarks use
this to talk to a real HTTP server, lifespan included)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from services.gateway.app import create_app
from services.gateway.migrate import upgrade
from shared.settings import Settings


@contextlib.contextmanager
def _leave_signals_alone() -> Iterator[None]:
    """Stands in for uvicorn's `capture_signals`: signals belong to the host process (pytest, the
    benchmark), not to this server."""
    yield


class EmbeddedGateway:
    def __init__(self, settings: Settings, migrate: bool = True) -> None:
        self.settings = settings
        self.migrate = migrate
        self.app: FastAPI | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[Any] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, *, wait_for_bus: bool = True) -> EmbeddedGateway:
        """Serve HTTP; with `wait_for_bus`, also until the bus side serves (raises if its start
        failed), as a deployment's `/ready` would wait."""
        if self.migrate:
            await asyncio.to_thread(upgrade, self.settings)
        self.app = create_app(self.settings)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self._server = uvicorn.Server(config)
        # Replacing a method on one instance is what this is for; mypy flags any method assignment.
        self._server.capture_signals = _leave_signals_alone  # type: ignore[method-assign]
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()  # startup failed: raise its error
                raise RuntimeError("gateway did not start")
            await asyncio.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        if wait_for_bus:
            startup = self.app.state.host.startup
            await startup.settled()
            if startup.failed:
                await self.stop()
                raise RuntimeError(f"the gateway's bus side did not start: {startup.error}")
        return self

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, 15)


class GatewayProcess:
    """The gateway as its own process (`python -m services.gateway`), as it is deployed; the
    benchmarks use it so the client does not share a CPU with the server."""

    def __init__(self, env: dict[str, str], port: int, log: Path | None = None) -> None:
        self.env = env
        self.port = port
        self.log = log  # its output goes there (appended), else to this process's
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout_s: float = 30.0) -> GatewayProcess:
        import os
        import sys

        import httpx

        out = self.log.open("ab") if self.log is not None else None
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.gateway", "--migrate", "--port", str(self.port),
                env={**os.environ, **self.env}, stdout=out, stderr=asyncio.subprocess.STDOUT if out else None,
            )  # fmt: skip
        finally:
            if out is not None:
                out.close()  # the child has its own copy
        async with httpx.AsyncClient() as client:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            while loop.time() < deadline:
                if self._proc.returncode is not None:
                    raise RuntimeError(f"gateway exited with {self._proc.returncode}")
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    # Started: its bus side serves (`/ready` may still wait for a dispatcher).
                    if (await client.get(f"{self.url}/ready")).json()["checks"]["start"]["ok"]:
                        return self
                await asyncio.sleep(0.05)
        raise RuntimeError("gateway did not come up")

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 15)
            if self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()



def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a child process the same deployment as `settings`."""
    env = {
        "AGENTIX_NATS_SERVERS": ",".join(settings.nats_servers),
        "AGENTIX_SUBJECT_PREFIX": settings.subject_prefix,
        "AGENTIX_DATA_DIR": str(settings.data_dir),
        "AGENTIX_RATE_LIMIT_PER_MIN": str(settings.rate_limit_per_min),
        "AGENTIX_HEARTBEAT_INTERVAL_S": str(settings.heartbeat_interval_s),
        "AGENTIX_JS_REPLICAS": str(settings.js_replicas),
        "AGENTIX_LOG_LEVEL": "WARNING",
    }
    if settings.jwt_secret:
        env["AGENTIX_JWT_SECRET"] = settings.jwt_secret
    if settings.gateway_db_url:
        env["AGENTIX_GATEWAY_DB_URL"] = settings.gateway_db_url
    return env
