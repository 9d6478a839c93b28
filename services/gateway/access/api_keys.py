"""API keys: long-lived, revocable, per user (docs/API.md "API keys"). A key is `agx_` and 43
random characters, shown once when it is made; the database keeps its HMAC-SHA256 under the
server's secret key (`hash_secret`) and its first 12 characters, to recognise it by. This module
makes, lists, finds and revokes the records; `key_auth.py` verifies a key on a request."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway.access.principal import SCOPES, Principal
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.tables import ApiKey, aware, now
from shared.settings import GatewaySettings

KEY_MARK = "agx_"
PREFIX_CHARS = 12  # `agx_` and 8 characters: what the list shows
_DURATION = re.compile(r"^(\d{1,5})([mhdw])$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_KEYS_PER_USER = 100  # keys not revoked


class KeyCreate(BaseModel):
    """`POST /api/v1/keys`. `expires_in` is a duration (`90d`, `12h`, `30m`, `2w`), `expires_at`
    an instant; neither: the key does not expire. `scopes` omitted: all the creator may use."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    scopes: list[str] | None = None
    expires_in: str | None = Field(default=None, max_length=16)
    expires_at: datetime | None = None


def is_api_key(token: str) -> bool:
    return token.startswith(KEY_MARK)


def hash_secret(settings: GatewaySettings) -> bytes:
    """The key of the keys' HMAC: the server's secret key (`AGENTIX_SECRET_KEY`, which stored
    secrets are encrypted with). Changing it invalidates every API key."""
    return settings.persistent_secret("secret_key").encode()


def key_hash(secret: bytes, key: str) -> str:
    return hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()


def _bad(field: str, detail: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", detail, errors=[{"code": "invalid", "field": field, "message": detail}])


def expiry_of(body: KeyCreate, at: datetime) -> datetime | None:
    if body.expires_in is not None and body.expires_at is not None:
        raise _bad("expires_in", "Give expires_in or expires_at, not both.")
    if body.expires_in is not None:
        match = _DURATION.match(body.expires_in.strip())
        if not match or int(match.group(1)) == 0:
            raise _bad("expires_in", f"expires_in {body.expires_in!r} is not a duration such as 90d, 12h, 30m or 2w.")
        return at + timedelta(seconds=int(match.group(1)) * _UNIT_S[match.group(2)])
    if body.expires_at is not None:
        when = body.expires_at
        if when.tzinfo is None:
            raise _bad("expires_at", "expires_at needs a time zone (e.g. 2027-01-01T00:00:00Z).")
        if when <= at:
            raise _bad("expires_at", "expires_at is in the past.")
        return when
    return None


def scopes_of(body: KeyCreate, creator: Principal) -> list[str]:
    allowed = [s for s in SCOPES if s != "admin" or creator.is_admin]
    if creator.scopes is not None:  # a key makes keys with at most its own scopes
        allowed = [s for s in allowed if s in creator.scopes]
    if body.scopes is None:
        return allowed
    unknown = [s for s in body.scopes if s not in SCOPES]
    if unknown:
        raise _bad("scopes", f"Unknown scope {unknown[0]!r}: the scopes are {', '.join(SCOPES)}.")
    if not body.scopes:
        raise _bad("scopes", "A key needs at least one scope.")
    beyond = [s for s in body.scopes if s not in allowed]
    if beyond:
        raise ApiProblem(403, "Forbidden", f"You may not make a key with the {beyond[0]!r} scope.")
    return [s for s in SCOPES if s in body.scopes]


def view(row: ApiKey) -> dict[str, Any]:
    return {
        "id": row.id, "name": row.name, "prefix": row.prefix, "scopes": list(row.scopes or []),
        "created_at": aware(row.created_at), "last_used_at": aware(row.last_used_at),
        "expires_at": aware(row.expires_at), "revoked_at": aware(row.revoked_at),
    }


def create(session: Session, settings: GatewaySettings, creator: Principal, body: KeyCreate) -> dict[str, Any]:
    """The new key's view with the key itself, which is never shown again."""
    at = now()
    expires_at = expiry_of(body, at)
    scopes = scopes_of(body, creator)
    active = session.exec(select(ApiKey.id).where(ApiKey.user_id == creator.id,
                                                  col(ApiKey.revoked_at).is_(None))).all()
    if len(active) >= MAX_KEYS_PER_USER:
        raise ApiProblem(409, "Conflict", f"You have {MAX_KEYS_PER_USER} keys; revoke one first.")
    key = KEY_MARK + secrets.token_urlsafe(32)
    row = ApiKey(id=new_id("key"), user_id=creator.id, name=body.name.strip() or body.name, prefix=key[:PREFIX_CHARS],
                 hash=key_hash(hash_secret(settings), key), scopes=scopes, admin=creator.is_admin, created_at=at,
                 expires_at=expires_at)
    session.add(row)
    session.flush()
    return {**view(row), "key": key}


def list_keys(session: Session, user_id: str) -> list[dict[str, Any]]:
    rows = session.exec(select(ApiKey).where(ApiKey.user_id == user_id).order_by(col(ApiKey.id).desc()))
    return [view(r) for r in rows]


def revoke(session: Session, caller: Principal, key_id: str) -> ApiKey:
    """Revoke the caller's own key (an admin: anyone's); a key revoked already stays as it was."""
    row = session.get(ApiKey, key_id)
    if row is None or not caller.can_see(row.user_id):
        raise ApiProblem(404, "Not Found", f"No key {key_id}.")
    if row.revoked_at is None:
        row.revoked_at = now()
        session.add(row)
    return row


@dataclass(frozen=True)
class KeyRecord:
    """What a request's verification needs of a key row."""

    id: str
    principal: Principal
    expires_at: float | None  # epoch seconds
    revoked: bool


def find(session: Session, digest: str) -> KeyRecord | None:
    row = session.exec(select(ApiKey).where(ApiKey.hash == digest)).first()
    if row is None:
        return None
    scopes = frozenset(row.scopes or ())
    principal = Principal(id=row.user_id, is_admin=row.admin and "admin" in scopes, key_id=row.id, scopes=scopes)
    expires = aware(row.expires_at)
    return KeyRecord(row.id, principal, expires.timestamp() if expires else None, row.revoked_at is not None)
