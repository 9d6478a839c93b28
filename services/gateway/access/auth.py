"""Bearer-token authentication: who the caller is, as a Principal."""

from __future__ import annotations

import time

from services.gateway.access.principal import Principal
from shared.auth_tokens import InvalidToken, verify_token
from shared.errors import AgentixError
from shared.settings import GatewaySettings


class AuthError(AgentixError):
    """The caller could not be authenticated; `detail` says why (never the token)."""

    code = "unauthorized"
    http_status = 401

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


# A verified token's principal is reused for this long (and never past the token's expiry): a
# client sends the same token with every request, and verifying it (HMAC, claims, the secret)
# each time is pure repetition. Nothing else decides a principal (no revocation list, the admin
# list is fixed at start), so a reused principal is the one verification would give again.
VERIFIED_TTL_S = 60.0
VERIFIED_MAX = 4096  # distinct tokens remembered; the oldest entry makes room


class VerifiedTokens:
    """The principals of recently verified bearer tokens, keyed by the token itself."""

    def __init__(self, ttl_s: float = VERIFIED_TTL_S, max_entries: int = VERIFIED_MAX) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: dict[str, tuple[Principal, float]] = {}  # token → (principal, valid until, epoch s)

    def get(self, token: str) -> Principal | None:
        entry = self._entries.get(token)
        if entry is None:
            return None
        if time.time() >= entry[1]:
            del self._entries[token]
            return None
        return entry[0]

    def put(self, token: str, principal: Principal, expires_at: float) -> None:
        if token not in self._entries and len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]  # dicts keep insertion order: the oldest
        self._entries[token] = (principal, min(time.time() + self.ttl_s, expires_at))


def is_admin_id(settings: GatewaySettings, user_id: str) -> bool:
    return user_id in settings.admin_users


def bearer_of(authorization: str | None) -> str:
    """The token of `Authorization: Bearer <token>` (a JWT or an API key)."""
    if not authorization:
        raise AuthError("A bearer token is required.")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("Use the Authorization: Bearer <token> scheme.")
    return token.strip()


def principal_from_header(
    settings: GatewaySettings, authorization: str | None, verified: VerifiedTokens | None = None
) -> Principal:
    """Verify `Authorization: Bearer <jwt>`; raise AuthError saying what is wrong (never the token).
    With `verified`, a token verified shortly before is not verified again."""
    if settings.auth_disabled:
        # Explicit dev mode only: one fixed user who may do everything.
        return Principal(id=settings.dev_user, is_admin=True)
    token = bearer_of(authorization)
    known = verified.get(token) if verified is not None else None
    if known is not None:
        return known
    try:
        claims = verify_token(settings, token)
    except InvalidToken as exc:
        raise AuthError(f"The bearer token is invalid: {exc}.") from exc
    principal = Principal(id=claims.sub, is_admin=claims.admin or is_admin_id(settings, claims.sub))
    if verified is not None:
        verified.put(token, principal, claims.exp)
    return principal
