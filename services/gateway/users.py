"""Users: creation (CLI `agentix user add`), lookup and password login."""

from __future__ import annotations

import re

from sqlmodel import Session

from services.gateway.db import Database
from services.gateway.migrate import check_schema
from services.gateway.passwords import DUMMY_HASH, hash_password, verify_password
from services.gateway.tables import User
from shared.settings import Settings

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


def add_user(settings: Settings, name: str, password: str, admin: bool = False) -> User:
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


def authenticate(session: Session, name: str, password: str) -> User | None:
    user = session.get(User, name) if NAME_RE.match(name) else None
    if user is None or user.disabled:
        verify_password(password, DUMMY_HASH)
        return None
    return user if verify_password(password, user.password_hash) else None
