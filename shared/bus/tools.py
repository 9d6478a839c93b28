"""Tools over NATS: a registry where each tool is declared once, the `nats.micro` service built
from it (queue group, bounded concurrency, every failure answered as a clean error), and the
client the dispatcher and gateway call tools with."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointConfig, EndpointStats, Service
from pydantic import BaseModel, ValidationError

from shared.aio import cancel_and_wait
from shared.bus.client import Bus, encode
from shared.bus.names import ToolService
from shared.bus.tracing import consumer_span, inject_headers
from shared.contract.tools import ToolAnnotations, ToolDescriptor, ToolList, ToolMeta, ToolReply, ToolRequest
from shared.errors import AgentixError
from shared.settings import VERSION

log = logging.getLogger("agentix.bus.tools")
SERVICE_NAMES: dict[str, str] = {"go": "tools-go", "py": "tools-py"}


class ToolFailure(AgentixError):
    """Raise from a handler to answer `{ok:false, error:{code, message, retryable}}`;
    `retryable` when the same call may succeed later (a store that is down, not a bad request)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message, code=code, retryable=retryable)


@dataclass
class ToolContext:
    """What a handler knows about its caller, plus the bus for tools that call other tools."""

    meta: ToolMeta
    bus: Bus


Handler = Callable[[Any, ToolContext], Awaitable[Any]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    params: type[BaseModel]
    handler: Handler
    agent: bool = True
    inject: tuple[str, ...] = ()
    high_risk: bool = False
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)

    def descriptor(self, service: ToolService) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            title=self.title,
            description=self.description,
            agent=self.agent,
            input_schema=self.params.model_json_schema(),
            inject=list(self.inject),
            service=service,
            high_risk=self.high_risk,
            annotations=self.annotations,
        )


@dataclass
class ToolRegistry:
    service: ToolService
    specs: dict[str, ToolSpec] = field(default_factory=dict)

    def tool(
        self,
        *,
        name: str,
        title: str,
        description: str,
        agent: bool = True,
        inject: Sequence[str] = (),
        high_risk: bool = False,
        annotations: ToolAnnotations | None = None,
    ) -> Callable[[Handler], Handler]:
        """Declare a tool; its params model is the type of the handler's first argument.
        `annotations` are MCP's hints about what the tool does (read-only, destructive, …)."""

        def register(handler: Handler) -> Handler:
            hints = handler.__annotations__
            params = next(iter(hints.values()))
            if isinstance(params, str):  # postponed annotations
                params = handler.__globals__[params]
            if name in self.specs or name == "list_tools":
                raise ValueError(f"tool {name!r} declared twice")
            self.specs[name] = ToolSpec(
                name, title, description, params, handler, agent, tuple(inject), high_risk,
                annotations or ToolAnnotations(),
            )
            return handler

        return register

    def descriptors(self) -> list[ToolDescriptor]:
        return [spec.descriptor(self.service) for spec in self.specs.values()]


@dataclass
class _EndpointMetrics:
    errors: int = 0
    total_ms: float = 0.0
    calls: int = 0
    last_error: str | None = None

    def as_data(self) -> dict[str, Any]:
        avg = self.total_ms / self.calls if self.calls else 0.0
        return {"errors": self.errors, "calls": self.calls, "avg_ms": round(avg, 3), "last_error": self.last_error}


class ToolServer:
    """Runs handlers as bounded background tasks: `nats.micro` calls an endpoint's handler one
    request at a time, so the handler only admits work and returns."""

    def __init__(self, bus: Bus, registry: ToolRegistry, concurrency: int) -> None:
        self.bus = bus
        self.registry = registry
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self.metrics: dict[str, _EndpointMetrics] = {}
        self.service: Service | None = None

    @property
    def inflight(self) -> int:
        return len(self._tasks)

    async def start(self) -> Service:
        reg = self.registry
        self.service = await add_service(
            self.bus.nc,
            name=SERVICE_NAMES[reg.service],
            version=VERSION,
            description=f"Agentix {reg.service} tools",
            queue_group="q",
            stats_handler=self._stats,
        )
        subjects = self.bus.subjects
        await self.service.add_endpoint(
            EndpointConfig(name="list_tools", subject=subjects.list_tools(reg.service), handler=self._list_tools)
        )
        for spec in reg.specs.values():
            self.metrics[spec.name] = _EndpointMetrics()
            await self.service.add_endpoint(
                EndpointConfig(
                    name=spec.name,
                    subject=subjects.tool(reg.service, spec.name),
                    handler=self._admit(spec),
                    metadata={"agent": str(spec.agent).lower(), "high_risk": str(spec.high_risk).lower()},
                )
            )
        return self.service

    def _stats(self, endpoint: EndpointStats) -> dict[str, Any]:
        metrics = self.metrics.get(endpoint.name)
        return metrics.as_data() if metrics else {}

    async def _list_tools(self, request: Request) -> None:
        await request.respond(encode(ToolList(tools=self.registry.descriptors())))

    def _admit(self, spec: ToolSpec) -> Callable[[Request], Awaitable[None]]:
        async def handler(request: Request) -> None:
            await self._slots.acquire()
            task = asyncio.create_task(self._run(spec, request))
            self._tasks.add(task)
            task.add_done_callback(self._finished)

        return handler

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _run(self, spec: ToolSpec, request: Request) -> None:
        started = time.perf_counter()
        metrics = self.metrics[spec.name]
        with consumer_span(f"tool {spec.name}", request.headers, **{"agentix.tool": spec.name}):
            reply = await self._invoke(spec, request)
        metrics.calls += 1
        metrics.total_ms += (time.perf_counter() - started) * 1000
        headers = None
        if not reply.ok and reply.error:
            metrics.errors += 1
            metrics.last_error = f"{reply.error.code}: {reply.error.message}"[:300]
            # Stock NATS tooling reads these headers; our callers read the JSON body.
            headers = {"Nats-Service-Error": reply.error.message[:200], "Nats-Service-Error-Code": "400"}
        try:
            await request.respond(encode(reply), headers=headers)
        except Exception:  # the requester is gone or the connection dropped; nothing to answer
            log.debug("could not answer %s", spec.name, exc_info=True)

    async def _invoke(self, spec: ToolSpec, request: Request) -> ToolReply:
        try:
            req = ToolRequest.model_validate_json(request.data or b"{}")
            args = spec.params.model_validate(req.args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}" for e in exc.errors()[:10]
            )
            return ToolReply.failure("bad_arguments", f"{spec.name}: {problems}")
        try:
            result = await spec.handler(args, ToolContext(meta=req.meta, bus=self.bus))
        except ToolFailure as exc:
            return ToolReply.failure(exc.code, exc.message, retryable=exc.retryable)
        except Exception as exc:
            log.exception("tool %s failed", spec.name)
            return ToolReply.failure("internal", f"{spec.name} failed: {type(exc).__name__}")
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        return ToolReply.success(result)

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Stop taking requests, let running handlers finish for `timeout_s`, then cancel the rest
        (their callers get no answer and time out or retry, as on a crash)."""
        if self.service is not None:
            await self.service.stop()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        for task in list(self._tasks):
            await cancel_and_wait(task)


async def serve_tools(bus: Bus, registry: ToolRegistry, concurrency: int | None = None) -> ToolServer:
    server = ToolServer(bus, registry, concurrency or bus.settings.tool_concurrency)
    await server.start()
    return server


@dataclass(frozen=True)
class ToolListing:
    """Every tool the tool services listed, and the services that did not answer: a tool of
    theirs is missing for now, not unknown (one of them may be restarting)."""

    tools: list[ToolDescriptor]
    missing: tuple[ToolService, ...] = ()


# How long a listing answers for: a new tool is seen within this, and a call pays no registry
# round trip. A listing without a service (restarting, or slow to answer) answers for less, so
# its tools are back soon after the service; a service that is down answers "no responders" at
# once, so asking again often costs little.
LISTING_TTL_S = 5.0
INCOMPLETE_LISTING_TTL_S = 1.0


class CachedListing:
    """`ToolClient.listing()` kept for `ttl_s`, or for `incomplete_ttl_s` while a service is
    missing from it; concurrent askers share one refresh. What the dispatcher's runs and the
    gateway's MCP catalog list tools through."""

    def __init__(self, client: ToolClient, ttl_s: float = LISTING_TTL_S,
                 incomplete_ttl_s: float = INCOMPLETE_LISTING_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.incomplete_ttl_s = incomplete_ttl_s
        self.clock = clock
        self.last: ToolListing | None = None  # the listing as it stands, without asking
        self._at = 0.0
        self._rounds = 0  # listings asked for so far
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        if self.last is None:
            return False
        ttl = self.incomplete_ttl_s if self.last.missing else self.ttl_s
        return self.clock() - self._at <= ttl

    async def get(self, *, refresh: bool = False) -> ToolListing:
        """The listing, asked for again when `refresh` or when it has expired."""
        if not refresh and self._fresh():
            assert self.last is not None
            return self.last  # the common case: no lock, no await
        rounds = self._rounds
        async with self._lock:
            if self._rounds == rounds or not self._fresh():  # nobody asked while this waited
                self.last, self._at = await self.client.listing(), self.clock()
                self._rounds += 1
            assert self.last is not None
            return self.last


class ToolClient:
    """Calls tools by name on whichever service registers them. A timeout or no responders is a
    tool error, never a hang."""

    def __init__(self, bus: Bus, services: Sequence[ToolService] = ("go", "py")) -> None:
        self.bus = bus
        self.services = tuple(services)
        self._where: dict[str, ToolService] = {}

    async def list_tools(self, timeout_s: float = 2.0) -> list[ToolDescriptor]:
        return (await self.listing(timeout_s)).tools

    async def listing(self, timeout_s: float = 2.0) -> ToolListing:
        found: list[ToolDescriptor] = []
        missing: list[ToolService] = []
        for service in self.services:
            try:
                msg = await self.bus.request_raw(self.bus.subjects.list_tools(service), b"", timeout=timeout_s)
                found.extend(ToolList.model_validate_json(msg.data).tools)
            except (NoRespondersError, NatsTimeout, TimeoutError):
                log.warning("tool service %s did not answer list_tools", service)
                missing.append(service)
        self._where = {d.name: d.service for d in found}
        return ToolListing(found, tuple(missing))

    async def call(
        self, tool: str, args: dict[str, Any], meta: ToolMeta | None = None, *, timeout_s: float | None = None
    ) -> ToolReply:
        if tool not in self._where:
            await self.list_tools()
        service = self._where.get(tool)
        if service is None:
            return ToolReply.failure("unknown_tool", f"no tool service registers {tool!r}")
        payload = encode(ToolRequest(args=args, meta=meta or ToolMeta()))
        timeout = timeout_s or self.bus.settings.tool_timeout_s
        try:
            msg = await self.bus.nc.request(
                self.bus.subjects.tool(service, tool), payload, timeout=timeout, headers=inject_headers()
            )
        except NoRespondersError:  # a service restarting, or not started yet
            return ToolReply.failure("unavailable", f"no instance of tools-{service} is serving {tool!r}",
                                     retryable=True)
        except (NatsTimeout, TimeoutError):
            return ToolReply.failure("timeout", f"{tool} did not answer within {timeout:g}s", retryable=True)
        try:
            return ToolReply.model_validate_json(msg.data)
        except ValidationError:
            return ToolReply.failure("bad_reply", f"{tool} answered something that is not a tool reply")
