"""Small helpers shared by the middleware: state access, route templates, sending problems."""

from __future__ import annotations

from typing import Any

from starlette.types import Message, Receive, Scope, Send

from services.gateway.problems import ApiProblem, problem_response


def state(scope: Scope) -> dict[str, Any]:
    """The per-request state dict (what `request.state` wraps), created if absent."""
    return scope.setdefault("state", {})


def route_template(scope: Scope) -> str:
    """`/api/v1/tasks/{task_id}` rather than the concrete path (bounded metric/audit labels)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return "unmatched"


def client_ip(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def send_problem(scope: Scope, receive: Receive, send: Send, problem: ApiProblem) -> None:
    await problem_response(scope, problem)(scope, receive, send)


async def replay_body(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the already-read body to the app once, then defers to the client."""
    sent = False

    async def _receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return _receive


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
