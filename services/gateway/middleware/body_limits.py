"""Size and media-type gate for request bodies: 413 over the limit, 415 for a type the API does
not speak (JSON everywhere; multipart only for knowledge-base uploads)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.middleware.common import header, replay_body, send_problem
from services.gateway.problems import ApiProblem

JSON_LIMIT = 1024 * 1024  # DSL.md: at most 1 MiB
UPLOAD_LIMIT = 64 * 1024 * 1024
UPLOAD_PREFIX = "/api/v1/kb/"


def _too_large(limit: int) -> ApiProblem:
    return ApiProblem(413, "Content Too Large", f"The request body is larger than {limit} bytes.")


def _media_type(scope: Scope) -> str:
    value = header(scope, b"content-type") or ""
    return value.split(";", 1)[0].strip().lower()


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in {"POST", "PUT", "PATCH"}:
            await self.app(scope, receive, send)
            return
        media = _media_type(scope)
        length_header = header(scope, b"content-length")
        has_body = (length_header not in (None, "0")) or header(scope, b"transfer-encoding") is not None
        is_upload = scope["path"].startswith(UPLOAD_PREFIX) and media == "multipart/form-data"
        limit = UPLOAD_LIMIT if is_upload else JSON_LIMIT

        if has_body and not is_upload and not (media == "application/json" or media.endswith("+json")):
            shown = media or "none"
            await send_problem(
                scope,
                receive,
                send,
                ApiProblem(415, "Unsupported Media Type", f"Send application/json (got {shown})."),
            )
            return
        if length_header is not None:
            try:
                declared = int(length_header)
            except ValueError:
                declared = -1
            if declared < 0:
                await send_problem(scope, receive, send, ApiProblem(400, "Bad Request", "Invalid Content-Length."))
                return
            if declared > limit:
                await send_problem(scope, receive, send, _too_large(limit))
                return

        if length_header is None and has_body:
            # Chunked upload: buffer up to the limit so an oversized body is a clean 413.
            body = await _read_limited(receive, limit)
            if body is None:
                await send_problem(scope, receive, send, _too_large(limit))
                return
            receive = await replay_body(body, receive)
        await self.app(scope, receive, send)


async def _read_limited(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
