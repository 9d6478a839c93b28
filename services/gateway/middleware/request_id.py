"""Every request gets an id (the client's `X-Request-ID` when it is sane); every response echoes it."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.middleware.common import header, state

_SANE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = header(scope, b"x-request-id")
        request_id = given if given and _SANE.match(given) else uuid.uuid4().hex
        state(scope)["request_id"] = request_id

        async def _send(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        await self.app(scope, receive, _send)
