"""The gateway's FastAPI application factory and its lifespan: HTTP serves at once, the bus side
(on the service host: bus, recorder, requeuer, heartbeats, health) starts in the background."""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import Scope

from services.gateway.access.admission import record_verdict
from services.gateway.access.auth import VerifiedTokens
from services.gateway.access.guardrail import Guardrail, Verdict
from services.gateway.access.key_auth import KeyVerifier
from services.gateway.access.key_revocations import KeyRevocations
from services.gateway.access.ratelimit import RateLimiter
from services.gateway.admin.control_publisher import ControlPublisher
from services.gateway.audit import write_audit
from services.gateway.chat.queue import ConversationQueue
from services.gateway.db import Database
from services.gateway.fleet.instances import InstanceRegistry
from services.gateway.fleet.metrics import GatewayMetrics
from services.gateway.middleware.audit import AuditMiddleware
from services.gateway.middleware.auth import AuthMiddleware
from services.gateway.middleware.body_limits import BodyLimitMiddleware
from services.gateway.middleware.guardrail import GuardrailMiddleware
from services.gateway.middleware.observe import ObserveMiddleware
from services.gateway.middleware.ratelimit import RateLimitMiddleware
from services.gateway.middleware.recovery import RecoveryMiddleware
from services.gateway.middleware.request_id import RequestIdMiddleware
from services.gateway.middleware.tracing import TracingMiddleware
from services.gateway.openapi import install_openapi
from services.gateway.problems import install_problem_handlers
from services.gateway.protocols.langgraph import mount_langgraph
from services.gateway.protocols.langgraph import webhook as lg_webhook
from services.gateway.protocols.mcp import mount_mcp
from services.gateway.protocols.openai import mount_openai
from services.gateway.routing import add_routes
from services.gateway.runs.feed import RunFeeds
from services.gateway.runs.recorded import RecordWatch
from services.gateway.runs.recorder import Recorder
from services.gateway.runs.requeue import Requeuer
from services.gateway.schema_version import check_schema
from services.gateway.triggers.callback_worker import CallbackWorker
from services.gateway.triggers.callbacks import CallbackEnds
from services.gateway.triggers.firing import FireConsumer
from services.gateway.triggers.run_callbacks import RunCallbacks
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.contract.heartbeat import Load
from shared.errors import AgentixError
from shared.service_host import ServiceHost
from shared.settings import VERSION, GatewaySettings
from shared.telemetry import setup_tracing

log = logging.getLogger("agentix.gateway")

SERVICE = "gateway"
CORE_ROUTERS = ("health", "auth", "users", "keys", "dsl", "tasks", "events", "workflows", "admin", "mcp_servers",
                "chat", "schedules", "hooks", "callbacks")
# Written by other modules of the project; mounted when present.
OPTIONAL_ROUTERS = ("kb", "memory", "reports")


def _make_redis(settings: GatewaySettings) -> Any | None:
    if not settings.redis_url:
        return None
    import redis.asyncio as aioredis

    return aioredis.from_url(settings.redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """HTTP serves at once, while the bus side starts in the background on the service host
    (uvicorn owns the HTTP side and the signals): until NATS answers and the streams are declared,
    `/ready` answers 503 "starting" and says why (`st.host.startup`), and routes that need the bus
    answer 503. On shutdown a start still under way is abandoned; the requeuer, recorder and
    instance registry stop before the instance leaves the bus, then the rate limiter and the
    database are closed."""
    st = app.state
    host = st.host = ServiceHost(st.settings, SERVICE)
    starting = asyncio.create_task(_start_bus_side(app, host), name="gateway-bus-start")
    try:
        yield
    finally:
        await cancel_and_wait(starting)
        try:
            await host.stop()
        finally:
            st.bus = st.run_feeds = st.record_watch = st.key_revocations = None
            await st.limiter.close()
            await st.api_keys.close()  # the last uses not yet written
            await st.db.drain()
            st.db.close()


async def _start_bus_side(app: FastAPI, host: ServiceHost) -> None:
    """Connect and declare (waiting as long as that takes, `ServiceHost.start`), wire what runs on
    the bus, then serve. A start that fails is recorded (`/ready` says why) and stops the server
    (`st.stop_serving`: the process exits with code 1)."""
    st = app.state
    try:
        bus = await host.start()
        _wire_bus_side(app, host, bus)
        await st.publisher.sync_all()
        await st.instances.start()
        await st.key_revocations.start()
        await st.recorder.start()
        await st.conversation_queue.start()
        await st.record_watch.start()
        await st.fires.start()
        st.requeuer.start()
        await st.callback_ends.start()
        await st.callback_worker.start()
        st.bus = bus  # routes use the bus from here on
        await host.serve()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if not host.startup.failed:
            host.startup.fail(exc)
        if isinstance(exc, AgentixError):
            log.error("gateway: %s", exc)
        else:
            log.exception("gateway: starting the bus side failed")
        if st.stop_serving is not None:
            st.stop_serving()


def _wire_bus_side(app: FastAPI, host: ServiceHost, bus: Bus) -> None:
    """What runs on the bus, registered on the host so that a stop (even one during the start)
    drains it: task feeds first, then the requeuer, recorder and instance registry (newest first)."""
    st = app.state
    settings: GatewaySettings = st.settings
    st.control = ControlPlane(bus)
    st.publisher = ControlPublisher(st.db, st.control)
    bus.on_reconnect(st.publisher.sync_soon)  # a change saved while NATS was down goes out now
    st.instances = InstanceRegistry(bus)
    host.on_drain("instance registry", st.instances.stop)
    st.key_revocations = KeyRevocations(bus, st.api_keys, st.instances, host.instance)
    host.on_drain("key revocations", st.key_revocations.stop)
    st.recorder = Recorder(bus, st.db, st.metrics, linger_s=settings.recorder_linger_ms / 1000)
    host.on_drain("event recorder", st.recorder.stop)
    # A chat or `/lg` run's completion callback is fixed when the queue records the run's end.
    run_callbacks = RunCallbacks(bus, st.db, {"lg": lg_webhook.payload})
    st.conversation_queue = ConversationQueue(bus, st.db, ends=run_callbacks)
    host.on_drain("conversation queue", st.conversation_queue.stop)
    st.record_watch = RecordWatch(bus)
    host.on_drain("record watch", st.record_watch.stop)
    st.fires = FireConsumer(bus, st.db)  # each schedule fire → one task (or a recorded skip)
    host.on_drain("schedule fires", st.fires.stop)
    st.requeuer = Requeuer(st.db, bus, settings.task_requeue_interval_s, settings.task_requeue_min_age_s)
    host.on_drain("requeuer", st.requeuer.stop)
    st.callback_ends = CallbackEnds(bus, st.db)
    host.on_drain("callback ends", st.callback_ends.stop)
    st.callback_worker = CallbackWorker(bus, st.db, settings)
    host.on_drain("callback deliveries", st.callback_worker.stop)
    # One read of each live run's events shared by all its clients, whatever their protocol;
    # drained first (steps run newest first), so its consumers are gone before the instance leaves.
    st.run_feeds = RunFeeds(bus)
    host.on_drain("run feeds", st.run_feeds.close)

    async def checks() -> dict[str, Any]:
        from services.gateway.fleet.readiness import readiness

        return (await readiness(app, require_dispatcher=False)).checks

    host.checks("readiness", checks)
    host.reports(load=lambda: Load(inflight=st.inflight, done=st.recorder.applied))


def _add_routers(app: FastAPI) -> None:
    for name in CORE_ROUTERS:
        module = importlib.import_module(f"services.gateway.routes.{name}")
        add_routes(app, module.router)
    for name in OPTIONAL_ROUTERS:
        try:
            module = importlib.import_module(f"services.gateway.routes.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"services.gateway.routes.{name}":
                raise
            continue
        add_routes(app, module.router)
    try:  # the web console (static files at /console), when it is installed
        console = importlib.import_module("services.gateway.console")
    except ModuleNotFoundError as exc:
        if exc.name != "services.gateway.console":
            raise
    else:
        console.mount_console(app)


def _install_middleware(app: FastAPI, settings: GatewaySettings) -> None:
    st = app.state

    async def record_guardrail(scope: Scope, verdict: Verdict) -> None:
        await record_verdict(st, scope, verdict)

    async def record_audit(**fields: Any) -> None:
        await write_audit(st.db, **fields)

    origins = list(settings.cors_origins)
    if "*" in origins and not settings.auth_disabled:
        log.warning("CORS origin '*' is only allowed in dev mode (auth disabled); ignoring it")
        origins = [o for o in origins if o != "*"]

    # Starlette wraps in reverse order of addition: the last added is the outermost.
    app.add_middleware(GuardrailMiddleware, guardrail=st.guardrail, record=record_guardrail)
    app.add_middleware(RateLimitMiddleware, limiter=st.limiter)
    app.add_middleware(AuthMiddleware, settings=settings, verified=st.verified_tokens, keys=st.api_keys)
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID", "X-Request-ID",
                       "X-Api-Key"],  # the LangGraph SDK's API key (`/lg`)
        # `/lg`: the LangGraph SDK reconnects to `Location`, reads the run from `Content-Location`
        # and the next page from `X-Pagination-Next`.
        expose_headers=["X-Request-ID", "Retry-After", "Location", "Content-Location", "X-Pagination-Next"],
    )
    app.add_middleware(AuditMiddleware, write=record_audit)
    app.add_middleware(ObserveMiddleware, metrics=st.metrics)
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(TracingMiddleware)
    app.add_middleware(RecoveryMiddleware)


def create_app(settings: GatewaySettings, *, check_schema_version: bool = True) -> FastAPI:
    """Build the gateway. Refuses (SchemaMismatch) when the database is not migrated to head."""
    db = Database(settings.db_url("gateway"))
    if check_schema_version:
        try:
            check_schema(db.engine)
        except Exception:
            db.close()
            raise
    setup_tracing(settings, SERVICE)
    app = FastAPI(
        title="Agentix gateway",
        version=VERSION,
        lifespan=lifespan,
        description="HTTP and SSE API of Agentix (see docs/API.md).",
    )
    st = app.state
    st.settings = settings
    st.db = db
    st.verified_tokens = VerifiedTokens()
    st.api_keys = KeyVerifier(db, settings)
    st.bus = st.key_revocations = None
    # Set once the bus side has started (lifespan).
    st.run_feeds = st.record_watch = st.publisher = st.instances = None
    st.host = None  # the service host, with where the start is (`startup`), from the lifespan on
    st.stop_serving = None  # what stops the HTTP server (its process sets it): a failed start calls it
    st.metrics = GatewayMetrics()
    st.limiter = RateLimiter(settings.rate_limit_per_min, _make_redis(settings), settings.redis_key_prefix)
    # Calls per minute per inbound hook (its own key space, the same Redis; closed with `limiter`).
    st.hook_limiter = RateLimiter(settings.hook_rate_limit_per_min, st.limiter.redis,
                                  settings.redis_key_prefix + "hooks:")
    st.guardrail = Guardrail.from_settings(settings)
    st.inflight = 0
    install_problem_handlers(app)
    install_openapi(app)
    _add_routers(app)
    mount_mcp(app)  # MCP at /mcp, over the same tools and token
    mount_langgraph(app)  # the LangGraph Agent Server API at /lg, over conversations
    mount_openai(app)  # OpenAI-compatible at /v1, over the conversation runtime and the same token
    _install_middleware(app, settings)
    return app
