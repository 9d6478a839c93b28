"""The bridge: applies the `mcp.servers` control document (connect, reconnect, drop servers as
they are registered, changed, disabled or deleted), answers each enabled server's tools on
`P.tools.mcp.<server>.>` behind the tool services' queue group, and lists them for `list_tools`."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from services.tools_go_equiv.mcp_bridge.convert import bridged_name, descriptor, servable
from services.tools_go_equiv.mcp_bridge.timing import Timing
from shared.bus import Bus
from shared.bus.client import encode
from shared.bus.tracing import consumer_span
from shared.contract.control_keys import MCP_SERVERS_KEY
from shared.contract.mcp import McpServerConfig, McpServers
from shared.contract.tools import ToolDescriptor, ToolReply, ToolRequest
from shared.secrets import SecretError, decrypt_secret

if TYPE_CHECKING:  # the MCP SDK loads with the first registered server, not with the service
    from services.tools_go_equiv.mcp_bridge.connection import McpConnection

log = logging.getLogger("agentix.tools_go.mcp")
QUEUE_GROUP = "q"  # the tool services' queue group: replicas share the calls


def _same_session(a: McpServerConfig, b: McpServerConfig) -> bool:
    """Whether a changed config can keep its session (only the tool filters changed)."""
    same = ("transport", "url", "headers_enc", "command", "args", "network", "read_paths", "memory_mb", "sampling")
    return all(getattr(a, k) == getattr(b, k) for k in same)


class McpBridge:
    def __init__(self, bus: Bus, secret: str, concurrency: int, timing: Timing | None = None,
                 work_root: Path | None = None, sampler: Any = None) -> None:  # fmt: skip
        self.bus = bus
        self._sampler = sampler  # answers the sampling requests of servers that opted in (None: no model)
        self._work_root = work_root  # where stdio servers get their working directories
        self._secret = secret
        self._timing = timing or Timing()
        self._slots = asyncio.Semaphore(concurrency)
        self._lock = asyncio.Lock()  # one reconciliation at a time
        self.servers: dict[str, McpConnection] = {}
        self.disabled: list[str] = []
        self.revision = 0
        self._subs: dict[str, Subscription] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopped = False  # after the drain, a late control update connects nothing

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    # -- the control plane -----------------------------------------------------------------------
    async def apply(self, key: str, value: Any, _kv_revision: int) -> None:
        """`ControlPlane.watch` callback: every key passes here, only `mcp.servers` matters."""
        if key != MCP_SERVERS_KEY:
            return
        doc = McpServers.model_validate(value)
        async with self._lock:
            if self._stopped or doc.revision < self.revision:
                return  # an older document delivered late
            await self._reconcile(doc)
            self.revision = doc.revision

    async def _reconcile(self, doc: McpServers) -> None:
        wanted = {name: cfg for name, cfg in doc.servers.items() if cfg.enabled}
        for name, conn in list(self.servers.items()):
            if name not in wanted or not _same_session(conn.config, wanted[name]):
                await self._drop(name)
        for name, cfg in wanted.items():
            if name in self.servers:
                self.servers[name].config = cfg  # new filters apply to the next list and call
            else:
                await self._add(cfg)
        self.disabled = sorted(name for name, cfg in doc.servers.items() if not cfg.enabled)

    async def _add(self, cfg: McpServerConfig) -> None:
        from services.tools_go_equiv.mcp_bridge.connection import McpConnection

        headers, fatal = self._headers(cfg)
        conn = McpConnection(cfg, headers, self._timing, fatal=fatal, work_root=self._work_root,
                             sampler=self._sampler if cfg.sampling else None)
        self.servers[cfg.name] = conn
        subject = self.bus.subjects.tool("mcp", f"{cfg.name}.>")
        self._subs[cfg.name] = await self.bus.nc.subscribe(subject, queue=QUEUE_GROUP, cb=self._admit)
        conn.start()

    def _headers(self, cfg: McpServerConfig) -> tuple[dict[str, str], str | None]:
        """The decrypted headers, or why they are unusable (a server then never connects: a
        retry cannot fix a deployment secret that differs from the gateway's)."""
        if not cfg.headers_enc:
            return {}, None
        try:
            headers = json.loads(decrypt_secret(cfg.headers_enc, self._secret))
            if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
                raise ValueError("not an object of strings")
        except (SecretError, ValueError) as exc:
            fatal = f"its stored headers are unusable here: {exc}"
            log.error("MCP server %s: %s", cfg.name, fatal)
            return {}, fatal
        return headers, None

    async def _drop(self, name: str) -> None:
        sub = self._subs.pop(name, None)
        if sub is not None:
            await sub.unsubscribe()  # no new calls reach this replica
        conn = self.servers.pop(name, None)
        if conn is not None:
            await conn.stop()

    # -- list_tools ------------------------------------------------------------------------------
    def descriptors(self) -> list[ToolDescriptor]:
        """The tools of every enabled server (connected or not: a call to a down server answers
        a clear error), minus those the admin filtered out."""
        found: list[ToolDescriptor] = []
        for conn in self.servers.values():
            config = conn.config
            found.extend(descriptor(config, t) for name, t in sorted(conn.tools.items()) if servable(config, name))
        return found

    # -- calls -----------------------------------------------------------------------------------
    async def _admit(self, msg: Msg) -> None:
        """A subscription calls back one message at a time: run each call as its own task."""
        await self._slots.acquire()
        task = asyncio.create_task(self._answer(msg))
        self._inflight.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._slots.release()

    async def _answer(self, msg: Msg) -> None:
        server, _, tool = msg.subject.removeprefix(self.bus.subjects.tool("mcp", "")).partition(".")
        name = bridged_name(server, tool)
        with consumer_span(f"tool {name}", msg.headers, **{"agentix.tool": name}):
            result = await self._call(server, tool, msg.data)
        try:
            await msg.respond(encode(result))
        except Exception:  # the caller is gone or the connection dropped; nothing to answer
            log.debug("could not answer %s", name, exc_info=True)

    async def _call(self, server: str, tool: str, data: bytes) -> ToolReply:
        name = bridged_name(server, tool)
        conn = self.servers.get(server)
        if conn is None:
            return ToolReply.failure("unavailable", f"{name}: MCP server {server!r} is not enabled")
        if not servable(conn.config, tool) or (conn.connected and tool not in conn.tools):
            return ToolReply.failure("unknown_tool", f"MCP server {server!r} serves no tool {tool!r} here")
        try:
            request = ToolRequest.model_validate_json(data or b"{}")
        except ValidationError:
            return ToolReply.failure("bad_arguments", f"{name}: the request is not a tool request")
        # `meta` (who calls) stays in Agentix: an external server gets the arguments only.
        return await conn.call(tool, request.args)

    # -- status and shutdown ---------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "servers": [conn.status() for _, conn in sorted(self.servers.items())],
            "disabled": self.disabled,
        }

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Stop taking calls, let running ones answer, close every session."""
        self._stopped = True
        for sub in list(self._subs.values()):
            await sub.unsubscribe()
        self._subs.clear()
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=timeout_s)
        for name in list(self.servers):
            await self._drop(name)
