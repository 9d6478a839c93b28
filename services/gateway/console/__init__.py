"""The web console: a React + TypeScript app (source in `web/`, built by Vite into `dist/`, which is
committed, so installing and serving it needs no Node) served at /console. The browser talks to
the public /api/v1 HTTP/SSE API like any other client."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

CONSOLE_DIR = Path(__file__).resolve().parent / "dist"
MOUNT = "/console"


class ConsoleFiles(StaticFiles):
    """Static files with an index fallback: a deep link such as /console/runs/t_1 gets the app
    shell (the router reads the location), while a missing asset (.js, .css) stays a 404."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            response = await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404 or "." in path.rsplit("/", 1)[-1]:
                raise
            response = await super().get_response("index.html", scope)
        # Always revalidate: a new release must never run against a cached old module graph.
        response.headers["Cache-Control"] = "no-cache"
        return response


def mount_console(app: FastAPI) -> None:
    """Serve the console at /console (and redirect the bare path to the trailing-slash one)."""

    @app.get(MOUNT, include_in_schema=False)
    async def _console_root() -> RedirectResponse:
        return RedirectResponse(f"{MOUNT}/", status_code=307)

    app.mount(MOUNT, ConsoleFiles(directory=CONSOLE_DIR, html=True), name="console")
