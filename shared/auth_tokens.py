"""Bearer tokens: HS256 JWTs with `sub`, `iat`, `exp` (and `role` for admins). Minted by the
gateway's login and by the CLI (`agentix token NAME [--admin]`), verified by the gateway."""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.lean_imports import import_without

import_without("jwt", "cryptography")  # HS256 needs no cryptography (see shared/lean_imports.py)

import jwt  # noqa: E402

from shared.errors import AgentixError  # noqa: E402
from shared.settings import GatewaySettings  # noqa: E402

ALGORITHM = "HS256"


class InvalidToken(AgentixError, ValueError):
    """Missing, expired, tampered, wrongly signed or otherwise unusable token."""

    code = "invalid_token"
    http_status = 401


@dataclass(frozen=True)
class TokenClaims:
    sub: str
    admin: bool
    exp: int
    iat: int


def _secret(settings: GatewaySettings) -> str:
    return settings.persistent_secret("jwt_secret")


def mint_token(settings: GatewaySettings, user_id: str, admin: bool = False, ttl_s: int | None = None) -> str:
    if not user_id:
        raise ValueError("user id must not be empty")
    now = int(time.time())
    claims: dict[str, object] = {"sub": user_id, "iat": now, "exp": now + (ttl_s or settings.jwt_ttl_s)}
    if admin:
        claims["role"] = "admin"
    return jwt.encode(claims, _secret(settings), algorithm=ALGORITHM)


def verify_token(settings: GatewaySettings, token: str) -> TokenClaims:
    try:
        # A fixed algorithm list: `alg: none` and any asymmetric confusion are rejected.
        claims = jwt.decode(
            token,
            _secret(settings),
            algorithms=[ALGORITHM],
            options={"require": ["sub", "exp", "iat"]},
            leeway=5,
        )
    except jwt.PyJWTError as exc:
        raise InvalidToken(str(exc)) from exc
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise InvalidToken("the token has no subject")
    return TokenClaims(sub=sub, admin=claims.get("role") == "admin", exp=int(claims["exp"]), iat=int(claims["iat"]))
