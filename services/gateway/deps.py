"""FastAPI dependencies shared by every route (including routes written by other modules).

Each is `async def`: they only read what the app and the middleware left on the request, and
FastAPI runs a plain `def` dependency on a worker thread, a thread round trip per dependency per
request (three on most routes: about 1 ms of CPU per request in-process, `docs/PERFORMANCE.md`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from services.gateway.access.principal import Principal
from services.gateway.admin.control_publisher import ControlPublisher
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from shared.bus import Bus
from shared.settings import Settings

__all__ = [
    "AdminUser",
    "BusDep",
    "CurrentUser",
    "MaybeBusDep",
    "Principal",
    "SettingsDep",
    "get_bus",
    "get_publisher",
    "get_settings",
]


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_bus(request: Request) -> Bus:
    bus = getattr(request.app.state, "bus", None)
    if bus is None or not bus.nc.is_connected:
        raise ApiProblem(503, "Service Unavailable", "The message bus is not connected.")
    return bus


async def get_bus_if_any(request: Request) -> Bus | None:
    """The bus even while it is reconnecting (or None before start): for writes that keep their
    own record and publish later when NATS is back."""
    return getattr(request.app.state, "bus", None)


def get_publisher(request: Request) -> ControlPublisher:
    """What broadcasts an admin change once it is saved; 503 while the gateway is starting (the
    change goes out when its bus side is up: the start publishes every newer saved value)."""
    publisher = getattr(request.app.state, "publisher", None)
    if publisher is None:
        raise ApiProblem(503, "Service Unavailable",
                         "Saved, but not yet broadcast (the gateway is starting); it is sent once its bus is up.")
    return publisher


async def get_database(request: Request) -> Database:
    return request.app.state.db


async def current_user(request: Request) -> Principal:
    # The auth middleware has verified the bearer token and stored the principal.
    principal = getattr(request.state, "principal", None)
    if principal is None:
        raise ApiProblem(
            401, "Unauthorized", "A valid bearer token is required.", headers={"WWW-Authenticate": "Bearer"}
        )
    return principal


async def admin_user(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    if not user.is_admin:
        raise ApiProblem(403, "Forbidden", "This route is for administrators.")
    return user


CurrentUser = Annotated[Principal, Depends(current_user)]
AdminUser = Annotated[Principal, Depends(admin_user)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
BusDep = Annotated[Bus, Depends(get_bus)]
MaybeBusDep = Annotated[Bus | None, Depends(get_bus_if_any)]
DatabaseDep = Annotated[Database, Depends(get_database)]
