"""One external MCP server: a client session held by its own task, which connects, lists the
tools, re-lists them while idle and reconnects by itself (backing off) whenever the session breaks.
Calls come from other tasks and never wait on a broken session: they fail at once, or at their
timeout."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.tools_go_equiv.mcp_bridge.convert import bridged_name, reply
from services.tools_go_equiv.mcp_bridge.stdio import sandboxed_stdio
from services.tools_go_equiv.mcp_bridge.timing import Timing
from shared.aio import cancel_and_wait, wait_set
from shared.contract.mcp import McpServerConfig
from shared.contract.tools import ToolReply
from shared.settings import VERSION

log = logging.getLogger("agentix.tools_go.mcp")
__all__ = ["CallStats", "McpConnection", "Timing"]


STREAM_READ_S = 300.0  # the SDK's own default for a streamed (SSE) response
STDIO_START_S = 30.0  # more for a stdio server's handshake: its process starts first (npx, uvx…)


@dataclass
class CallStats:
    calls: int = 0
    errors: int = 0
    total_ms: float = 0.0
    last_error: str | None = None

    def record(self, ms: float, result: ToolReply) -> None:
        self.calls += 1
        self.total_ms += ms
        if not result.ok and result.error is not None:
            self.errors += 1
            self.last_error = f"{result.error.code}: {result.error.message}"[:300]


def describe(exc: BaseException) -> str:
    """The innermost useful words of an error (the SDK raises exception groups from task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def http_client(
    url: str, headers: dict[str, str], timing: Timing, on_response: Callable[[httpx2.Response], Awaitable[None]]
) -> httpx2.AsyncClient:
    """The session's HTTP client. Over plain HTTP every request gets a fresh connection: a server
    on uvicorn (the SDK's own) reads the next request of a kept-alive connection only once the
    previous streamed response's task has ended, some 40 ms later, while a loopback or LAN
    connect costs well under a millisecond. Over HTTPS a TLS handshake costs more than that
    wait, so connections are kept."""
    limits = httpx2.Limits(max_keepalive_connections=0) if url.startswith("http://") else httpx2.Limits()
    return httpx2.AsyncClient(
        headers=headers,
        # Reads wait on streamed responses: the call timeout bounds a call, this only a dead stream.
        timeout=httpx2.Timeout(timing.connect_s, read=STREAM_READ_S),
        limits=limits,
        event_hooks={"response": [on_response]},
    )


class McpConnection:
    def __init__(
        self,
        config: McpServerConfig,
        headers: dict[str, str],
        timing: Timing,
        *,
        fatal: str | None = None,
        work_root: Path | None = None,
        sampler: Any = None,
    ) -> None:
        self._sampler = sampler  # the sampling callback, for a server that opted in
        self.config = config  # replaced in place when only its tool filters change
        self._work_root = work_root or Path(".agentix") / "mcp-stdio"  # stdio servers' working directories
        self._headers = headers
        self._timing = timing
        self._fatal = fatal  # a problem no retry fixes (headers that do not decrypt)
        self.tools: dict[str, mcp_types.Tool] = {}  # the last listing, kept while disconnected
        self.connected = False
        self.connected_since: float | None = None
        self.last_error: str | None = fatal
        self.stats = CallStats()
        self._client: Client | None = None
        self._broken = asyncio.Event()
        self._http_status: int | None = None  # the last HTTP error status of this session
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        if self._fatal is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp-session-{self.name}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    # -- the session task ------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self._timing.reconnect
        failures = 0  # sessions that ended since one was last up
        while True:
            try:
                await self._session()
                error = "the session ended"
            except Exception as exc:  # includes the SDK's exception groups; cancellation passes
                error = describe(exc)
                if self._http_status is not None:  # the SDK's words rarely say "401"
                    error = f"{error} (HTTP {self._http_status})"
            if self.connected_since is not None:
                failures = 0  # it was up: the first retry comes soon
            self._set_down(error)
            await asyncio.sleep(backoff.delay(failures))
            failures += 1

    async def _session(self) -> None:
        t = self._timing
        self._broken.clear()
        self._http_status = None
        cfg = self.config
        http: httpx2.AsyncClient | None = None
        transport: Any
        if cfg.transport == "stdio":  # `headers` is its environment
            transport = sandboxed_stdio(cfg, self._headers, self._work_root)
        elif cfg.transport == "sse":  # the legacy HTTP+SSE transport, for older servers
            transport = sse_client(cfg.url, headers=self._headers, timeout=t.connect_s, sse_read_timeout=STREAM_READ_S)
        else:
            http = http_client(cfg.url, self._headers, t, self._note_status)
            transport = streamable_http_client(cfg.url, http_client=http)
        info = mcp_types.Implementation(name="agentix-mcp-bridge", version=VERSION)
        async with contextlib.AsyncExitStack() as stack:
            try:
                # The whole handshake is bounded: a server that accepts and never speaks must
                # not hold the session task (the SDK's own timeouts start after the handshake).
                async with asyncio.timeout(t.connect_s * 3 + (STDIO_START_S if cfg.transport == "stdio" else 0)):
                    if http is not None:
                        await stack.enter_async_context(http)
                    client = await stack.enter_async_context(
                        # Sampling is a request of the server's on the session's back channel, which
                        # only the handshake era has (deprecated by 2026-07-28): a server that opted
                        # in is spoken to in it.
                        Client(transport, cache=None, read_timeout_seconds=t.connect_s, client_info=info,
                               sampling_callback=self._sampler, mode="legacy" if self._sampler else "auto")
                    )
                    tools = await self._list_tools(client)
            except TimeoutError:
                raise ConnectionError(f"no handshake within {t.connect_s * 3:g}s") from None
            self._set_up(client, tools)
            try:
                await self._watch(client)
            finally:
                self._client = None

    async def _watch(self, client: Client) -> None:
        """Until a call sees the connection fail or a re-listing fails (which raises)."""
        t = self._timing
        while not self._broken.is_set():
            if await wait_set(self._broken, t.probe_every_s):
                return  # a call saw the connection fail: start over
            tools = await asyncio.wait_for(self._list_tools(client), t.connect_s * 3)
            self.tools = tools  # a changed listing shows in the next list_tools

    async def _note_status(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._http_status = response.status_code

    @staticmethod
    async def _list_tools(client: Client) -> dict[str, mcp_types.Tool]:
        tools: dict[str, mcp_types.Tool] = {}
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever is cut off
            page = await client.list_tools(cursor=cursor)
            tools.update((t.name, t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _set_up(self, client: Client, tools: dict[str, mcp_types.Tool]) -> None:
        self._client, self.tools, self.connected = client, tools, True
        self.connected_since, self.last_error = time.time(), None
        log.info("MCP server %s connected: %d tools", self.name, len(tools))

    def _set_down(self, error: str) -> None:
        was = self.connected
        self._client, self.connected, self.connected_since, self.last_error = None, False, None, error
        if was:
            log.warning("MCP server %s lost: %s", self.name, error)

    # -- calls -----------------------------------------------------------------------------------
    async def call(self, tool: str, args: dict[str, Any]) -> ToolReply:
        started = time.perf_counter()
        result = await self._call(tool, args)
        self.stats.record((time.perf_counter() - started) * 1000, result)
        return result

    async def _call(self, tool: str, args: dict[str, Any]) -> ToolReply:
        name = bridged_name(self.name, tool)
        client = self._client
        if client is None:
            why = self.last_error or "connecting"
            return ToolReply.failure("unavailable", f"{name}: MCP server {self.name!r} is not connected ({why})",
                                     retryable=self._fatal is None)  # the session task reconnects
        timeout = self._timing.call_s
        try:
            # The SDK's own read timeout first; ours is the backstop that guarantees no hang (a
            # timeout scope rather than `wait_for`, which would cost a task per call).
            async with asyncio.timeout(timeout + 1):
                result = await client.call_tool(tool, args, read_timeout_seconds=timeout)
        except TimeoutError:
            return self._timed_out(name, timeout)
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:  # the SDK's read timeout: the session lives on
                return self._timed_out(name, timeout)
            if exc.code == mcp_types.CONNECTION_CLOSED or client is not self._client:
                self._broken.set()  # the session task reconnects
                why = f"{exc.error.message} (reconnecting)"
                return ToolReply.failure("unavailable", f"{name}: MCP server {self.name!r}: {why}", retryable=True)
            return ToolReply.failure("mcp_error", f"{name}: {exc.error.message}"[:2000])
        except Exception as exc:  # the transport failed: the session task reconnects
            self._broken.set()
            return ToolReply.failure("unavailable", f"{name}: MCP server {self.name!r} failed: {describe(exc)}",
                                     retryable=True)
        return reply(name, result)

    def _timed_out(self, name: str, timeout: float) -> ToolReply:
        return ToolReply.failure("timeout", f"{name}: MCP server {self.name!r} did not answer within {timeout:g}s",
                                 retryable=True)

    def status(self) -> dict[str, Any]:
        stats = self.stats
        return {
            "name": self.name,
            "transport": self.config.transport,
            "url": self.config.url or None,
            "command": self.config.command,
            "connected": self.connected,
            "connected_since": self.connected_since,
            "tools": len(self.tools),
            "calls": stats.calls,
            "errors": stats.errors,
            "avg_latency_ms": round(stats.total_ms / stats.calls, 3) if stats.calls else None,
            "last_error": self.last_error if not self.connected else stats.last_error,
        }
