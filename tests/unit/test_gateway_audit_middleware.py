"""The audit middleware holds a mutating request's response until its row is committed, and
lets a request that changed nothing (`request.state.read_only`) answer before its commit."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from services.gateway.middleware.audit import AuditMiddleware


class HeldWriter:
    """Records each row; a row that is waited for is committed only when `commit` is set."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.commit = asyncio.Event()
        self.written = asyncio.Event()

    async def __call__(self, *, wait: bool = True, **fields: Any) -> None:
        self.rows.append({**fields, "wait": wait})
        self.written.set()
        if wait:
            await self.commit.wait()


def app_with(writer: HeldWriter) -> httpx.AsyncClient:
    async def search(request: Request) -> JSONResponse:
        request.state.read_only = True
        return JSONResponse({"hits": []})

    async def create(request: Request) -> JSONResponse:
        return JSONResponse({"id": "x"}, status_code=201)

    app = Starlette(routes=[Route("/search", search, methods=["POST"]), Route("/things", create, methods=["POST"])])
    app.add_middleware(AuditMiddleware, write=writer)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")


async def test_a_read_only_post_answers_before_its_row_is_committed() -> None:
    writer = HeldWriter()
    async with app_with(writer) as client:
        response = await client.post("/search", json={})  # the commit is never released here
    assert response.status_code == 200
    assert [(r["route"], r["outcome"], r["wait"]) for r in writer.rows] == [("/search", "ok", False)]


async def test_a_read_only_row_is_queued_only_after_its_body_has_gone() -> None:
    sent: list[str] = []
    queued_after: list[list[str]] = []

    async def write(**_: Any) -> None:
        queued_after.append(list(sent))

    async def search(scope: Any, receive: Any, send: Any) -> None:
        scope.setdefault("state", {})["read_only"] = True
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"] + (" more" if message.get("more_body") else ""))

    scope = {"type": "http", "method": "POST", "path": "/search", "headers": [], "state": {}}
    await AuditMiddleware(search, write=write)(scope, receive, send)
    assert queued_after == [["http.response.start", "http.response.body more", "http.response.body"]]


async def test_a_read_only_response_cut_short_still_queues_its_row() -> None:
    rows: list[dict[str, Any]] = []

    async def write(**fields: Any) -> None:
        rows.append(fields)

    async def search(scope: Any, receive: Any, send: Any) -> None:
        scope.setdefault("state", {})["read_only"] = True
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise asyncio.CancelledError  # the client went away before the body

    async def send(message: dict[str, Any]) -> None:
        pass

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/search", "headers": [], "state": {}}
    with contextlib.suppress(asyncio.CancelledError):
        await AuditMiddleware(search, write=write)(scope, receive, send)
    assert [(r["status"], r["wait"]) for r in rows] == [(200, False)]


async def test_a_mutating_post_answers_only_once_its_row_is_committed() -> None:
    writer = HeldWriter()
    async with app_with(writer) as client:
        request = asyncio.create_task(client.post("/things", json={}))
        await writer.written.wait()
        assert not request.done()  # the row is being written: no response yet
        writer.commit.set()
        response = await request
    assert response.status_code == 201
    assert [(r["route"], r["status"], r["wait"]) for r in writer.rows] == [("/things", 201, True)]
