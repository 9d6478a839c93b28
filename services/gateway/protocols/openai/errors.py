"""OpenAI's error shape for everything under `/v1`: `{"error": {message, type, param, code}}` with
the status the `openai` SDK maps to its exceptions (400 BadRequestError, 401 AuthenticationError,
404 NotFoundError, 429 RateLimitError…). The routes raise `ApiProblem` as every gateway route
does; the route class below renders it (and request validation errors) in this shape instead of
problem+json, because an OpenAI client reads only this one."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from services.gateway.problems import ApiProblem, request_id_of, validation_items

# OpenAI's `type` per status; anything else 4xx is an invalid request.
_TYPES = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error",
          409: "conflict_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    return "server_error" if status >= 500 else _TYPES.get(status, "invalid_request_error")


def error_body(message: str, status: int, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type(status), "param": param, "code": code}}


def from_problem(problem: ApiProblem) -> dict[str, Any]:
    first = (problem.errors or [{}])[0]
    code = first.get("code") if problem.errors else problem.type
    return error_body(problem.detail, problem.status, code, first.get("field"))


def from_validation(exc: RequestValidationError) -> dict[str, Any]:
    """OpenAI answers a malformed or invalid body with 400, naming the first bad parameter."""
    items = validation_items(exc.errors())
    first = items[0] if items else {"code": "invalid", "message": "invalid request"}
    where = first.get("field")
    message = f"{where}: {first['message']}" if where else str(first["message"])
    return error_body(message, 400, str(first["code"]), where)


def error_response(request: Request, status: int, body: dict[str, Any],
                   headers: dict[str, str] | None = None) -> JSONResponse:
    headers = dict(headers or {})
    rid = request_id_of(request.scope)
    if rid:
        headers.setdefault("X-Request-ID", rid)
    return JSONResponse(body, status_code=status, headers=headers)


class OpenAIRoute(APIRoute):
    """A route whose known failures answer in OpenAI's error shape (a bug stays a bug: it
    reaches the gateway's recovery middleware as on every route)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiProblem as exc:
                return error_response(request, exc.status, from_problem(exc), exc.headers)
            except RequestValidationError as exc:
                return error_response(request, 400, from_validation(exc))
            except StarletteHTTPException as exc:
                detail = exc.detail if isinstance(exc.detail, str) else "Request failed."
                return error_response(request, exc.status_code, error_body(detail, exc.status_code),
                                      dict(exc.headers or {}))

        return handle
