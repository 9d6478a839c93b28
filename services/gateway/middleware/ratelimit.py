"""Per user (per IP when anonymous) request budget on `/api/v1`; 429 with `Retry-After`."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.access.admission import over_limit
from services.gateway.access.ratelimit import RateLimiter
from services.gateway.middleware.common import client_ip, send_problem, state


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/api/v1"):
            await self.app(scope, receive, send)
            return
        principal = state(scope).get("principal")
        key = f"user:{principal.id}" if principal is not None else f"ip:{client_ip(scope)}"
        decision = await self.limiter.hit(key)
        if not decision.allowed:
            await send_problem(scope, receive, send, over_limit(self.limiter, decision))
            return
        await self.app(scope, receive, send)
