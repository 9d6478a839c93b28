"""Users: creation (CLI `agentix user add`), lookup, password login, and a user's own settings
(the default model of their chat runs), which they read and change as `users/me` and admins see."""

from __future__ import annotations

import re
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session

from services.gateway.access.passwords import DUMMY_HASH, hash_password, verify_password
from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.pagination import Page, keyed_page
from services.gateway.problems import ApiProblem
from services.gateway.schema_version import check_schema
from services.gateway.tables import User, aware
from shared.settings import GatewaySettings

NAME_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
MIN_PASSWORD = 8


def validate_new_user(name: str, password: str) -> None:
    if not NAME_RE.match(name):
        raise ValueError("user names are 1-64 characters of letters, digits and _ . @ -")
    if len(password) < MIN_PASSWORD:
        raise ValueError(f"passwords need at least {MIN_PASSWORD} characters")


def save_user(session: Session, name: str, password: str, admin: bool) -> User:
    """Create the user, or reset the password and role of an existing one."""
    validate_new_user(name, password)
    user = session.get(User, name)
    if user is None:
        user = User(id=name, password_hash=hash_password(password))
    else:
        user.password_hash = hash_password(password)
    user.role = "admin" if admin else "user"
    session.add(user)
    return user


def add_user(settings: GatewaySettings, name: str, password: str, admin: bool = False) -> User:
    """For the CLI: `python -m services.gateway user add NAME [--admin] [--password P]`."""
    db = Database(settings.db_url("gateway"))
    try:
        check_schema(db.engine)
        with db.session() as session:
            user = save_user(session, name, password, admin)
            session.commit()
            return user
    finally:
        db.close()


def ensure_admin(settings: GatewaySettings, name: str) -> str | None:
    """Create the admin `name` (the console login `agentix up` gives a newcomer) when it does not
    exist; returns its generated password (to be shown once), or None when the user exists
    already (its password is then left alone)."""
    db = Database(settings.db_url("gateway"))
    try:
        with db.session() as session:
            if session.get(User, name) is not None:
                return None
            password = secrets.token_urlsafe(12)
            save_user(session, name, password, admin=True)
            session.commit()
            return password
    finally:
        db.close()


def authenticate(session: Session, name: str, password: str) -> User | None:
    user = session.get(User, name) if NAME_RE.match(name) else None
    if user is None or user.disabled:
        verify_password(password, DUMMY_HASH)
        return None
    return user if verify_password(password, user.password_hash) else None


class UserPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_model: str | None = Field(default=None, max_length=200,
                                      description="null or empty: back to the failover chain")


def view(user_id: str, user: User | None, is_admin: bool) -> dict[str, Any]:
    return {"id": user_id, "role": "admin" if is_admin else "user",
            "disabled": user.disabled if user else False,
            "default_model": user.default_model if user else None,
            "created_at": aware(user.created_at) if user else None}


def me(session: Session, principal: Principal) -> dict[str, Any]:
    """The caller as the gateway knows them; a user known only by their token has no row yet."""
    return view(principal.id, session.get(User, principal.id), principal.is_admin)


def update_me(session: Session, principal: Principal, body: UserPatch) -> dict[str, Any]:
    user = session.get(User, principal.id)
    if user is None:  # a token-only user: a row without a password (it never logs in with one)
        user = User(id=principal.id, password_hash="", role="admin" if principal.is_admin else "user")
    if "default_model" in body.model_fields_set:
        user.default_model = body.default_model or None
    session.add(user)
    session.flush()
    return view(principal.id, user, principal.is_admin)


def default_model(session: Session, user_id: str) -> str | None:
    user = session.get(User, user_id)
    return user.default_model if user else None


def admin_view(session: Session, user_id: str, admin_ids: list[str]) -> dict[str, Any]:
    user = session.get(User, user_id)
    if user is None:
        raise ApiProblem(404, "Not Found", f"No user {user_id!r}.")
    return view(user.id, user, user.is_admin or user.id in admin_ids)


def list_page(session: Session, limit: int, cursor: str | None, admin_ids: list[str]) -> Page:
    """Users by id, a page at a time."""
    return keyed_page(session, User, "id", limit, cursor, lambda u: view(u.id, u, u.is_admin or u.id in admin_ids))
