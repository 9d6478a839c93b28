"""RFC 9457 problem details: the only error shape the gateway ever returns."""

from __future__ import annotations

import logging
import re
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import Scope

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://agentix.dev/problems/"

log = logging.getLogger("agentix.gateway.problems")


class ApiProblem(Exception):
    """Raise from a route or service; rendered as problem+json. `errors` carries validation items
    (`{code, message, node_id?, edge_index?, field?}`)."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str = "",
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        type_: str | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.title = title
        self.detail = detail or title
        self.errors = errors
        self.headers = headers or {}
        self.type = type_ or _slug(title)


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "error"


def request_id_of(scope: Scope) -> str | None:
    state = scope.get("state") or {}
    return state.get("request_id") if isinstance(state, dict) else getattr(state, "request_id", None)


def problem_body(scope: Scope, problem: ApiProblem) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_BASE + problem.type,
        "title": problem.title,
        "status": problem.status,
        "detail": problem.detail,
        "instance": scope.get("path", ""),
        "request_id": request_id_of(scope),
    }
    if problem.errors is not None:
        body["errors"] = problem.errors
    return body


def problem_response(scope: Scope, problem: ApiProblem) -> JSONResponse:
    headers = dict(problem.headers)
    rid = request_id_of(scope)
    if rid:
        headers.setdefault("X-Request-ID", rid)
    return JSONResponse(
        problem_body(scope, problem),
        status_code=problem.status,
        headers=headers,
        media_type=PROBLEM_MEDIA_TYPE,
    )


def problem(status: int, detail: str = "", **kwargs: Any) -> ApiProblem:
    """An ApiProblem titled with the standard reason phrase."""
    return ApiProblem(status, HTTPStatus(status).phrase, detail, **kwargs)


def _validation_errors(exc: RequestValidationError) -> tuple[int, str, str, list[dict[str, Any]]]:
    items: list[dict[str, Any]] = []
    malformed = False
    for err in exc.errors():
        kind = str(err.get("type", "invalid"))
        if kind in {"json_invalid", "json_type"}:
            malformed = True
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        # Never echo the offending input back: it may hold a secret.
        items.append({"code": kind, "message": str(err.get("msg", "invalid")), "field": ".".join(loc) or None})
    items = [{k: v for k, v in i.items() if v is not None} for i in items]
    if malformed:
        return 400, "Malformed JSON", "The request body is not valid JSON.", items
    return 422, "Invalid request", "The request does not match the expected shape.", items


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem) -> JSONResponse:
        return problem_response(request.scope, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, title, detail, items = _validation_errors(exc)
        return problem_response(request.scope, ApiProblem(status, title, detail, errors=items))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = HTTPStatus(exc.status_code).phrase if exc.status_code in HTTPStatus._value2member_map_ else "Error"
        detail = exc.detail if isinstance(exc.detail, str) else phrase
        return problem_response(request.scope, ApiProblem(exc.status_code, phrase, detail, headers=exc.headers))
