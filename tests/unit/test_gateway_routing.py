"""The gateway's route table stays flat and its dependencies stay on the event loop: an included
router is a branch every request walks (FastAPI 0.16x), and a plain `def` dependency costs a
worker-thread round trip per request (services/gateway/routing.py, services/gateway/deps.py)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from services.gateway.app import create_app
from services.gateway.migrate import upgrade
from services.gateway.routing import add_routes
from shared.settings import GatewaySettings


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    settings = GatewaySettings(data_dir=Path(tmp_path_factory.mktemp("gateway")))
    upgrade(settings)
    return create_app(settings)


def _dependencies(dependant: Dependant) -> Iterator[Dependant]:
    for sub in dependant.dependencies:
        yield sub
        yield from _dependencies(sub)


def test_every_route_is_in_the_apps_own_table(app: FastAPI) -> None:
    kinds = {type(route).__name__ for route in app.router.routes if not isinstance(route, APIRoute | Route | Mount)}
    assert not kinds, f"routes that are not plain routes (an include_router?): {kinds}"
    paths = {route.path for route in app.router.routes if isinstance(route, APIRoute)}
    # Routers that used to be included under a prefix, or nested in another router.
    assert {"/api/v1/kb/{kb}/search", "/api/v1/memory/{key}", "/api/v1/admin/mcp-servers", "/lg/runs/stream",
            "/v1/chat/completions"} <= paths


def test_no_dependency_runs_on_a_worker_thread(app: FastAPI) -> None:
    routes = [route for route in app.router.routes if isinstance(route, APIRoute)]
    assert len(routes) > 50  # the check below saw the API
    sync = {
        f"{route.path}: {dep.call.__qualname__}"
        for route in routes
        for dep in _dependencies(route.dependant)
        if dep.call is not None and not inspect.iscoroutinefunction(dep.call)
        and not inspect.isasyncgenfunction(dep.call)
    }
    assert not sync, f"plain `def` dependencies (FastAPI runs each on a worker thread): {sorted(sync)[:10]}"


def test_a_nested_router_is_refused_naming_the_fix() -> None:
    outer, inner = APIRouter(prefix="/api/v1/outer"), APIRouter(prefix="/inner")

    @inner.get("/x")
    async def x() -> dict[str, str]:
        return {}

    outer.include_router(inner)
    with pytest.raises(TypeError, match="full prefix"):
        add_routes(FastAPI(), outer)
