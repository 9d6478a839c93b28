"""How a router's routes join the gateway: added to the app's own route table, never through
`include_router`.

FastAPI (0.16x) keeps an included router as a branch resolved at request time: the app's router
asks each branch in turn, and each branch tries each of its routes with scope bookkeeping of its
own, so a request for a route late in the table (`/api/v1/kb`, `/v1`, `/lg`) paid for walking
every route before it, and a 404 for walking all of them. Routes in the app's own table are
matched as Starlette matches them: one regular expression each. So every router here carries its
full prefix, and nests no other router."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import Route


def add_routes(app: FastAPI, router: APIRouter) -> None:
    """Append `router`'s routes to `app`'s table, in order."""
    nested = [route for route in router.routes if not isinstance(route, APIRoute | Route)]
    if nested:
        raise TypeError(f"{router.prefix or '/'}: only plain routes join the gateway, not {nested!r}; "
                        "give a nested router its full prefix and add it with add_routes")
    app.router.routes.extend(router.routes)


def query_read(request: Request) -> frozenset[str]:
    """The query parameters the request's route reads (its own and its dependencies'). Walked per
    request: a few dependants, and a route's identity is not a safe key across apps."""
    dependant: Dependant | None = getattr(request.scope.get("route"), "dependant", None)
    names: set[str] = set()
    pending = [dependant] if dependant is not None else []
    while pending:
        current = pending.pop()
        names.update(field.alias for field in current.query_params)
        pending.extend(current.dependencies)
    return frozenset(names)


def query_unread(request: Request) -> str | None:
    """The first query parameter the request's route does not read (FastAPI ignores it): a
    protocol refuses it in its own error shape rather than ignore what its client asked."""
    known = query_read(request)
    return next((name for name in request.query_params if name not in known), None)
