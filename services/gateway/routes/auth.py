"""`POST /api/v1/auth/login`: username + password → bearer token."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from services.gateway.access.users import authenticate
from services.gateway.deps import DatabaseDep, SettingsDep
from services.gateway.problems import ApiProblem
from shared.auth_tokens import mint_token

router = APIRouter(prefix="/api/v1/auth", tags=["auth"])


class Login(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=1024)


class TokenOut(BaseModel):
    access_token: str
    token_type: str = "bearer"
    expires_in: int


@router.post("/login", response_model=TokenOut)
async def login(body: Login, request: Request, settings: SettingsDep, db: DatabaseDep) -> TokenOut:
    request.state.audit_target = f"user={body.username}"
    user = await db.run(authenticate, body.username, body.password)
    if user is None:
        raise ApiProblem(401, "Unauthorized", "Unknown user or wrong password.", headers={"WWW-Authenticate": "Bearer"})
    admin = user.is_admin or user.id in settings.admin_users
    token = mint_token(settings, user.id, admin=admin)
    return TokenOut(access_token=token, expires_in=settings.jwt_ttl_s)
