"""`POST /api/v1/dsl/validate`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body

from services.gateway.deps import CurrentUser
from services.gateway.dsl import check_dsl, problem_items

router = APIRouter(prefix="/api/v1/dsl", tags=["tasks"])


@router.post("/validate", responses={422: {"description": "every problem of the workflow"}})
async def validate(_: CurrentUser, dsl: Any = Body(..., description="the workflow document")) -> dict[str, Any]:
    return {"valid": True, "warnings": problem_items(check_dsl(dsl))}
