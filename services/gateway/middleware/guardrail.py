"""Tier-1 guardrail on task input (`POST /api/v1/tasks`): block → 400 problem and a
guardrail-event row; grey → the rules are left in request state for the task message."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.guardrail import Guardrail, Verdict, strings_in
from services.gateway.middleware.common import read_body, replay_body, send_problem, state
from services.gateway.problems import ApiProblem

GUARDED = frozenset({("POST", "/api/v1/tasks")})
# (scope, verdict) -> None: persists the guardrail event.
Recorder = Callable[[Scope, Verdict], Awaitable[None]]


class GuardrailMiddleware:
    def __init__(self, app: ASGIApp, guardrail: Guardrail, record: Recorder) -> None:
        self.app = app
        self.guardrail = guardrail
        self.record = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope.get("path", "")) not in GUARDED:
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        receive = await replay_body(body, receive)
        try:
            payload = json.loads(body) if body else None
        except (ValueError, UnicodeDecodeError):
            payload = None  # malformed: the route answers with the parse error
        if isinstance(payload, dict):
            verdict = self.guardrail.check(strings_in(payload.get("input")))
            if verdict.action != "allow":
                await self.record(scope, verdict)
            if verdict.action == "block":
                problem = ApiProblem(
                    400,
                    "Input blocked by guardrail",
                    "The task input was blocked by the input guardrail (" + verdict.reason + ").",
                    errors=[{"code": "guardrail_blocked", "message": rule} for rule in verdict.rules],
                )
                await send_problem(scope, receive, send, problem)
                return
            if verdict.action == "flag":
                state(scope)["guardrail_grey"] = verdict.rules
        await self.app(scope, receive, send)
