"""Writes an audit row for every POST/PUT/PATCH/DELETE before its response leaves (the rows of
concurrent requests share a commit: `Database.run_grouped`). A route that changed nothing (a
search, an MCP read) says so with `request.state.read_only`: its row is written all the same, but
only once the response has gone. Queued any sooner, the writer's commit (SQL
compiled on a worker thread that holds the GIL for up to the interpreter's 5 ms switch interval)
would delay the body it does not need to wait for."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.audit import outcome_of
from services.gateway.middleware.common import client_ip, route_template, state

log = logging.getLogger("agentix.gateway.audit")
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Writer = Callable[..., Awaitable[None]]


def _target(scope: Scope) -> str | None:
    st = state(scope)
    explicit = st.get("audit_target")  # set by routes that create something (e.g. the new task id)
    if explicit:
        return str(explicit)[:300]
    params: dict[str, Any] = scope.get("path_params") or {}
    return ",".join(f"{k}={v}" for k, v in params.items())[:300] or None


class AuditMiddleware:
    def __init__(self, app: ASGIApp, write: Writer) -> None:
        self.app = app
        self.write = write

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in MUTATING:
            await self.app(scope, receive, send)
            return
        written = False

        async def record(status: int) -> None:
            nonlocal written
            if written:
                return
            written = True
            st = state(scope)
            principal = st.get("principal")
            try:
                await self.write(
                    user_id=principal.id if principal else None,
                    key_id=principal.key_id if principal else None,
                    method=scope["method"],
                    route=route_template(scope) if scope.get("route") else scope.get("path", "")[:300],
                    target=_target(scope),
                    status=status,
                    outcome=outcome_of(status),
                    request_id=st.get("request_id"),
                    ip=client_ip(scope),
                    wait=not st.get("read_only", False),
                )
            except Exception:
                log.exception("audit write failed (request_id=%s)", st.get("request_id"))

        after_body: int | None = None  # a read-only response's status, recorded once it has gone

        async def _send(message: Message) -> None:
            nonlocal after_body
            if message["type"] == "http.response.start":
                if state(scope).get("read_only", False):
                    after_body = int(message["status"])
                else:
                    await record(int(message["status"]))
            await send(message)
            if after_body is not None and message["type"] == "http.response.body" and not message.get("more_body"):
                await record(after_body)

        try:
            await self.app(scope, receive, _send)
        except Exception:
            await record(500)
            raise
        finally:
            if after_body is not None:
                # A response that ended without its last body message, or was cancelled (the
                # client went away): the row is still queued (without waiting: nothing suspends).
                await record(after_body)
