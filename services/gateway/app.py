"""The gateway's FastAPI application factory and its lifespan (bus, recorder, heartbeats)."""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import Scope

from services.gateway.admin.control import ControlPublisher
from services.gateway.audit import write_audit, write_guardrail_event
from services.gateway.db import Database
from services.gateway.guardrail import Guardrail, Verdict
from services.gateway.instances import InstanceRegistry
from services.gateway.metrics import GatewayMetrics
from services.gateway.middleware.audit import AuditMiddleware
from services.gateway.middleware.auth import AuthMiddleware
from services.gateway.middleware.body_limits import BodyLimitMiddleware
from services.gateway.middleware.common import route_template, state
from services.gateway.middleware.guardrail import GuardrailMiddleware
from services.gateway.middleware.observe import ObserveMiddleware
from services.gateway.middleware.ratelimit import RateLimitMiddleware
from services.gateway.middleware.recovery import RecoveryMiddleware
from services.gateway.middleware.request_id import RequestIdMiddleware
from services.gateway.middleware.tracing import TracingMiddleware
from services.gateway.migrate import check_schema
from services.gateway.openapi import install_openapi
from services.gateway.problems import install_problem_handlers
from services.gateway.ratelimit import RateLimiter
from services.gateway.recorder import Recorder
from services.gateway.requeue import Requeuer
from services.gateway.telemetry import setup_tracing
from shared.bus import Bus
from shared.bus.control import ControlPlane
from shared.bus.heartbeat import Heartbeater, serve_health
from shared.contract.heartbeat import Load
from shared.settings import VERSION, Settings

log = logging.getLogger("agentix.gateway")

SERVICE = "gateway"
CORE_ROUTERS = ("health", "auth", "dsl", "tasks", "events", "workflows", "admin")
# Written by other modules of the project; mounted when present.
OPTIONAL_ROUTERS = ("kb", "memory", "reports")


def _make_redis(settings: Settings) -> Any | None:
    if not settings.redis_url:
        return None
    import redis.asyncio as aioredis

    return aioredis.from_url(settings.redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    st = app.state
    settings: Settings = st.settings
    bus = await Bus.connect(settings, name=SERVICE)
    st.bus = bus
    try:
        await bus.declare()
        st.control = ControlPlane(bus)
        st.publisher = ControlPublisher(st.db, st.control)
        await st.publisher.sync_all()
        bus.on_reconnect(st.publisher.sync_soon)  # a change saved while NATS was down goes out now
        st.instances = InstanceRegistry(bus)
        await st.instances.start()
        st.recorder = Recorder(bus, st.db, st.metrics)
        await st.recorder.start()
        st.heartbeater = Heartbeater(bus, SERVICE, load=lambda: Load(inflight=st.inflight, done=st.recorder.applied))
        st.heartbeater.start()

        async def checks() -> dict[str, Any]:
            from services.gateway.readiness import readiness

            return (await readiness(app, require_dispatcher=False)).checks

        st.health_sub = await serve_health(bus, SERVICE, st.heartbeater.instance, checks)
        st.requeuer = Requeuer(st.db, bus, settings.task_requeue_interval_s, settings.task_requeue_min_age_s)
        st.requeuer.start()
        yield
    finally:
        for name in ("requeuer", "heartbeater", "recorder", "instances"):
            component = getattr(st, name, None)
            if component is not None:
                try:
                    await component.stop()
                except Exception:
                    log.exception("stopping %s failed", name)
        if getattr(st, "health_sub", None) is not None:
            try:
                await st.health_sub.unsubscribe()
            except Exception:
                log.debug("health subscription already gone")
        await bus.close()
        st.bus = None
        await st.limiter.close()
        st.db.close()


def _include_routers(app: FastAPI) -> None:
    for name in CORE_ROUTERS:
        module = importlib.import_module(f"services.gateway.routes.{name}")
        app.include_router(module.router)
    for name in OPTIONAL_ROUTERS:
        try:
            module = importlib.import_module(f"services.gateway.routes.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"services.gateway.routes.{name}":
                raise
            continue
        app.include_router(module.router, prefix="/api/v1")
    try:  # the web console (static files at /console), when it is installed
        console = importlib.import_module("services.gateway.console")
    except ModuleNotFoundError as exc:
        if exc.name != "services.gateway.console":
            raise
    else:
        console.mount_console(app)


def _install_middleware(app: FastAPI, settings: Settings) -> None:
    st = app.state

    async def record_guardrail(scope: Scope, verdict: Verdict) -> None:
        principal = state(scope).get("principal")
        await write_guardrail_event(
            st.db,
            user_id=principal.id if principal else None,
            tier=1,
            action="block" if verdict.action == "block" else "flag",
            rule=",".join(verdict.rules)[:100],
            reason=verdict.reason,
            route=route_template(scope) if scope.get("route") else scope.get("path"),
            request_id=state(scope).get("request_id"),
        )

    async def record_audit(**fields: Any) -> None:
        await write_audit(st.db, **fields)

    origins = list(settings.cors_origins)
    if "*" in origins and not settings.auth_disabled:
        log.warning("CORS origin '*' is only allowed in dev mode (auth disabled); ignoring it")
        origins = [o for o in origins if o != "*"]

    # Starlette wraps in reverse order of addition: the last added is the outermost.
    app.add_middleware(GuardrailMiddleware, guardrail=st.guardrail, record=record_guardrail)
    app.add_middleware(RateLimitMiddleware, limiter=st.limiter)
    app.add_middleware(AuthMiddleware, settings=settings)
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["GET", "POST", "PUT", "DELETE", "OPTIONS"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID", "X-Request-ID"],
        expose_headers=["X-Request-ID", "Retry-After"],
    )
    app.add_middleware(AuditMiddleware, write=record_audit)
    app.add_middleware(ObserveMiddleware, metrics=st.metrics)
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(TracingMiddleware)
    app.add_middleware(RecoveryMiddleware)


def create_app(settings: Settings, *, check_schema_version: bool = True) -> FastAPI:
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
    st.bus = None
    st.metrics = GatewayMetrics()
    st.limiter = RateLimiter(settings.rate_limit_per_min, _make_redis(settings), settings.redis_key_prefix)
    st.guardrail = Guardrail.from_settings(settings)
    st.inflight = 0
    install_problem_handlers(app)
    install_openapi(app)
    _include_routers(app)
    _install_middleware(app, settings)
    return app
