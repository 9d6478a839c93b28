"""RFC 9457 problem details: the only error shape the gateway ever returns."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import Scope

from shared.errors import AgentixError

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://agentix.dev/problems/"

log = logging.getLogger("agentix.gateway.problems")


class ApiProblem(AgentixError):
    """Raise from a route or service; rendered as problem+json. `errors` carries validation items
    (`{code, message, node_id?, edge_index?, field?}`), `extensions` any other members the
    problem's type defines (RFC 9457 §3.2). As an AgentixError its `code` is the problem's type
    and its `http_status` the status."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str = "",
        errors: list[dict[str, Any]] | None = None,
        headers: Mapping[str, str] | None = None,
        type_: str | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> None:
        self.type = type_ or _slug(title)
        super().__init__(detail or title, code=self.type, http_status=status)
        self.status = status
        self.title = title
        self.detail = detail or title
        self.errors = errors
        self.headers = dict(headers or {})
        self.extensions = dict(extensions or {})


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
    body.update(problem.extensions)
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


MALFORMED_JSON = {"json_invalid", "json_type"}


def validation_items(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic errors as problem `errors` items. Never echoes the offending input back (it may
    hold a secret). A JSON syntax error names where the parse stopped as `position` (a character
    offset into the body): FastAPI puts that offset in `loc`, and it is not a field."""
    items: list[dict[str, Any]] = []
    for err in errors:
        kind = str(err.get("type", "invalid"))
        message = str(err.get("msg", "invalid"))
        loc = [p for p in err.get("loc", ()) if p != "body"]
        item: dict[str, Any] = {"code": kind}
        if kind == "json_invalid":
            if loc and isinstance(loc[-1], int):
                item["position"] = loc[-1]
                message += f" at character {loc[-1]}"
            reason = (err.get("ctx") or {}).get("error")  # the decoder's words, never the input
            if reason and str(reason) not in message:
                message += f": {reason}"
        elif loc:
            item["field"] = ".".join(map(str, loc))
        item["message"] = message
        items.append(item)
    return items


def validation_problem(errors: Sequence[Mapping[str, Any]], detail: str | None = None) -> ApiProblem:
    """400 Malformed JSON when the body does not parse, else 422 with one item per error."""
    items = validation_items(errors)
    if any(item["code"] in MALFORMED_JSON for item in items):
        return ApiProblem(400, "Malformed JSON", "The request body is not valid JSON.", errors=items)
    return ApiProblem(422, "Invalid request", detail or "The request does not match the expected shape.", errors=items)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem) -> JSONResponse:
        return problem_response(request.scope, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem_response(request.scope, validation_problem(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        phrase = HTTPStatus(exc.status_code).phrase if exc.status_code in HTTPStatus._value2member_map_ else "Error"
        detail = exc.detail if isinstance(exc.detail, str) else phrase
        return problem_response(request.scope, ApiProblem(exc.status_code, phrase, detail, headers=exc.headers))
