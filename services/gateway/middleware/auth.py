"""Authenticates every `/api/v1` request except login; stores the principal for routes."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.access.admission import authenticate, unauthorized
from services.gateway.access.auth import AuthError, VerifiedTokens
from services.gateway.access.key_auth import KeyVerifier
from services.gateway.middleware.common import header, send_problem, state
from services.gateway.problems import ApiProblem
from shared.settings import GatewaySettings

API_PREFIX = "/api/v1"
API_SCOPES = ("api", "admin")  # an API key's scopes that open `/api/v1` (admin routes need `admin`)
PUBLIC = frozenset({"/api/v1/auth/login"})
# Browsers' EventSource cannot send headers: SSE routes also take `?access_token=`.
_SSE_PATH = re.compile(r"^/api/v1/(tasks/[^/]+/(events|stream|exec)|kb/ingest/[^/]+/stream)$")


class AuthMiddleware:
    def __init__(self, app: ASGIApp, settings: GatewaySettings, verified: VerifiedTokens, keys: KeyVerifier) -> None:
        self.app = app
        self.settings = settings
        self.verified = verified
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(API_PREFIX) or path in PUBLIC or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        authorization = header(scope, b"authorization")
        if authorization is None and scope["method"] == "GET" and _SSE_PATH.match(path):
            token = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("access_token")
            if token:
                authorization = f"Bearer {token[0]}"
        try:
            principal = await authenticate(self.settings, self.verified, self.keys, authorization, API_SCOPES)
        except AuthError as exc:
            await send_problem(scope, receive, send, unauthorized(exc))
            return
        except ApiProblem as problem:  # an API key without the scope
            await send_problem(scope, receive, send, problem)
            return
        state(scope)["principal"] = principal
        await self.app(scope, receive, send)
