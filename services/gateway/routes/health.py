"""Liveness, readiness and Prometheus metrics (outside `/api/v1`, no auth)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from services.gateway.fleet.metrics import CONTENT_TYPE
from services.gateway.fleet.readiness import live_services, readiness
from services.gateway.fleet.stats import task_counts
from services.gateway.problems import ApiProblem, problem_response

router = APIRouter(tags=["operations"])


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", responses={503: {"description": "starting (the body says why), or a dependency is down"}})
async def ready(request: Request) -> Any:
    result = await readiness(request.app)
    if result.ready:
        return {"status": "ready", "checks": result.checks, "services": live_services(request.app)}
    failed = [name for name, c in result.checks.items() if not c["ok"]]
    start = result.checks["start"]
    if start["ok"]:
        state, detail = "not-ready", f"Not ready: {', '.join(failed)}."
    elif start["state"] == "failed":
        state, detail = "failed", f"Failed to start: {start['detail']}."
    else:
        state, detail = "starting", f"Starting: {start['detail']}."
    return problem_response(request.scope, ApiProblem(
        503, "Service Unavailable", detail, type_="not-ready",
        extensions={"state": state, "failed": failed, "checks": result.checks, "services": live_services(request.app)},
    ))


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    st = request.app.state
    counts = await st.db.run(task_counts)
    reconnects = st.bus.reconnects if st.bus is not None else 0
    return Response(st.metrics.render(counts, reconnects), media_type=CONTENT_TYPE)
