"""Outermost: any unhandled exception becomes a bare problem+json 500 — never a stack trace."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.middleware.common import send_problem, state
from services.gateway.problems import ApiProblem

log = logging.getLogger("agentix.gateway.recovery")


class RecoveryMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def _send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, _send)
        except Exception:
            log.exception("unhandled error (request_id=%s)", state(scope).get("request_id"))
            if started:
                raise  # the response is under way; the server closes the connection
            await send_problem(
                scope,
                receive,
                send,
                ApiProblem(500, "Internal Server Error", "An unexpected error occurred; quote the request id."),
            )
