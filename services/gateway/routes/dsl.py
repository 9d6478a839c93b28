"""`POST /api/v1/dsl/validate`, `GET /api/v1/dsl/kinds`."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter, Body

from services.gateway.deps import CurrentUser
from services.gateway.dsl import check_dsl, problem_items
from shared.contract.kinds import kinds_catalog

router = APIRouter(prefix="/api/v1/dsl", tags=["tasks"])


@router.post("/validate", responses={422: {"description": "every problem of the workflow"}})
async def validate(_: CurrentUser, dsl: Any = Body(..., description="the workflow document")) -> dict[str, Any]:
    return {"valid": True, "warnings": problem_items(check_dsl(dsl))}


@cache
def _catalog() -> list[dict[str, Any]]:
    return kinds_catalog()  # the models do not change while the process runs


@router.get("/kinds")
async def kinds(_: CurrentUser) -> dict[str, Any]:
    """Every node kind: label, description, icon, handles and the JSON Schema of its `config`,
    generated from the models the validator enforces."""
    return {"kinds": _catalog()}
