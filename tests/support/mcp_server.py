"""A real MCP server (the `mcp` SDK's `MCPServer`) with two tools over streamable HTTP on
loopback, as its own process so a test can kill it and start it again on the same port.
`shout` fails when asked to shout "fail" and never answers "hang".

    python -m tests.support.mcp_server --port 0 [--token T] [--sse]
    # prints "READY http://127.0.0.1:PORT/mcp"; with --token, requests without
    # `Authorization: Bearer T` get a 401 (so a test sees the bridge's stored headers at work)

`McpServerProcess` runs it from a test: `await start()` (until READY), `await kill()`, `await
start()` again on the same port."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def build_server() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("agentix-test-mcp")

    @server.tool(
        title="Add",
        description="Add two integers.",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(
        title="Shout",
        description="Upper-case a text.",
        annotations=ToolAnnotations(destructive_hint=False),
    )
    async def shout(text: str) -> str:
        if text == "fail":
            raise ValueError("asked to fail")
        if text == "hang":  # a tool that never answers: the bridge's timeout must
            await asyncio.Event().wait()
        return text.upper()

    return server


def _app(token: str | None, sse: bool = False) -> Any:
    # `sse`: the legacy HTTP+SSE transport (GET /sse, POST /messages/), for the bridge's older servers
    app = build_server().sse_app() if sse else build_server().streamable_http_app()
    if not token:
        return app

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                start = {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]}
                await send(start)
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None)
    parser.add_argument("--sse", action="store_true", help="the legacy HTTP+SSE transport at /sse")
    opts = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", opts.port))
    port = sock.getsockname()[1]
    # Listening already: a client that connects before uvicorn is up waits in the backlog.
    sock.listen(128)
    print(f"READY http://127.0.0.1:{port}/{'sse' if opts.sse else 'mcp'}", flush=True)
    app = _app(opts.token, opts.sse)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


class McpServerProcess:
    """The server above as a child process, killable and restartable on the same port."""

    def __init__(self, token: str | None = None, sse: bool = False) -> None:
        self.token = token
        self.sse = sse
        self.port = 0
        self.url = ""
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, timeout_s: float = 30.0) -> McpServerProcess:
        args = ["-m", "tests.support.mcp_server", "--port", str(self.port)]
        if self.token:
            args.append(f"--token={self.token}")  # one form: a token may start with "-"
        if self.sse:
            args.append("--sse")
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, *args, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        assert self.proc.stdout is not None
        line = (await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)).decode()
        if not line.startswith("READY "):
            await self.kill()
            raise RuntimeError(f"MCP test server did not start: {line!r}")
        self.url = line.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        return self

    async def kill(self) -> None:
        """SIGKILL: the server vanishes mid-session, as a crash would."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
            self.proc = None


if __name__ == "__main__":
    main()
