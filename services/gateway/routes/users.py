"""`/api/v1/users/me` (thin): the caller's own settings."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from services.gateway.access import users
from services.gateway.deps import CurrentUser, DatabaseDep

router = APIRouter(prefix="/api/v1/users", tags=["users"])


@router.get("/me")
async def get_me(user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(users.me, user)


@router.patch("/me")
async def patch_me(body: users.UserPatch, user: CurrentUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(users.update_me, user, body)
