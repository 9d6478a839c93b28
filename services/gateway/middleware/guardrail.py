"""Tier-1 guardrail on task input (`POST /api/v1/tasks`, `POST /api/v1/tasks/stream`) and on chat messages
(`POST /api/v1/conversations/{id}/messages`, whose run is a task): block → 400 problem and a
guardrail-event row; grey → the rules are left in request state for the task message."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.access.admission import blocked
from services.gateway.access.guardrail import Guardrail, Verdict, strings_in
from services.gateway.middleware.common import read_body, replay_body, send_problem, state

GUARDED = frozenset({("POST", "/api/v1/tasks"), ("POST", "/api/v1/tasks/stream")})
CHAT_MESSAGE = re.compile(r"^/api/v1/conversations/[^/]+/messages$")
# (scope, verdict) -> None: persists the guardrail event.
Recorder = Callable[[Scope, Verdict], Awaitable[None]]


class GuardrailMiddleware:
    def __init__(self, app: ASGIApp, guardrail: Guardrail, record: Recorder) -> None:
        self.app = app
        self.guardrail = guardrail
        self.record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _guarded(scope["method"], scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        receive = await replay_body(body, receive)
        try:
            payload = json.loads(body) if body else None
        except (ValueError, UnicodeDecodeError):
            payload = None  # malformed: the route answers with the parse error
        if isinstance(payload, dict):
            verdict = self.guardrail.check(strings_in(_user_text(scope.get("path", ""), payload)))
            if verdict.action != "allow":
                await self.record(scope, verdict)
            if verdict.action == "block":
                await send_problem(scope, receive, send, blocked(verdict, "task input"))
                return
            if verdict.action == "flag":
                state(scope)["guardrail_grey"] = verdict.rules
        await self.app(scope, receive, send)


def _guarded(method: str, path: str) -> bool:
    return (method, path) in GUARDED or (method == "POST" and CHAT_MESSAGE.match(path) is not None)


def _user_text(path: str, payload: dict[str, Any]) -> Any:
    """What the user wrote: a task's `input`, a chat message's `text`."""
    return payload.get("text") if CHAT_MESSAGE.match(path) else payload.get("input")
