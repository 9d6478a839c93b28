"""Bearer-token authentication: who the caller is, as a Principal."""

from __future__ import annotations

from services.gateway.principal import Principal
from shared.auth_tokens import InvalidToken, verify_token
from shared.settings import Settings


class AuthError(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def is_admin_id(settings: Settings, user_id: str) -> bool:
    return user_id in settings.admin_users


def principal_from_header(settings: Settings, authorization: str | None) -> Principal:
    """Verify `Authorization: Bearer <jwt>`; raise AuthError saying what is wrong (never the token)."""
    if settings.auth_disabled:
        # Explicit dev mode only: one fixed user who may do everything.
        return Principal(id=settings.dev_user, is_admin=True)
    if not authorization:
        raise AuthError("A bearer token is required.")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("Use the Authorization: Bearer <token> scheme.")
    try:
        claims = verify_token(settings, token.strip())
    except InvalidToken as exc:
        raise AuthError(f"The bearer token is invalid: {exc}.") from exc
    return Principal(id=claims.sub, is_admin=claims.admin or is_admin_id(settings, claims.sub))
