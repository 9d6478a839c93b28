"""`agentix user add NAME`, and the console login `agentix up` creates for a newcomer."""

from __future__ import annotations

import argparse
import getpass
import os
import secrets
import sys

from shared.settings import Settings

DEV_ADMIN = "dev"  # the same name the dev token of `agentix up` carries


def _password(args: argparse.Namespace) -> str | None:
    """--password, --password-stdin, AGENTIX_USER_PASSWORD, else a prompt on a terminal."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if args.password or os.environ.get("AGENTIX_USER_PASSWORD"):
        return args.password or os.environ["AGENTIX_USER_PASSWORD"]
    if not sys.stdin.isatty():
        return None
    first = getpass.getpass(f"password for {args.name}: ")
    return first if getpass.getpass("again: ") == first else ""


def add_user_command(args: argparse.Namespace, settings: Settings) -> int:
    from services.gateway.migrate import SchemaMismatch
    from services.gateway.users import add_user

    try:
        password = _password(args)
    except (EOFError, KeyboardInterrupt):
        password = None
    if password is None:
        print("no password: there is no terminal to ask on. Pass --password-stdin (and the password on "
              "standard input), --password P, or set AGENTIX_USER_PASSWORD.", file=sys.stderr)
        return 2
    if password == "":
        print("the passwords did not match (or were empty); nothing saved", file=sys.stderr)
        return 2
    try:
        user = add_user(settings, args.name, password, args.admin)
    except (ValueError, SchemaMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"user {user.id} ({'admin' if args.admin else 'user'}) saved")
    return 0


def ensure_dev_admin(settings: Settings) -> str | None:
    """Create the `dev` admin for the console on a fresh data dir; returns its generated password
    (shown once), or None when the user exists already (its password is then left alone)."""
    from services.gateway.db import Database
    from services.gateway.tables import User
    from services.gateway.users import save_user

    db = Database(settings.db_url("gateway"))
    try:
        with db.session() as session:
            if session.get(User, DEV_ADMIN) is not None:
                return None
            password = secrets.token_urlsafe(12)
            save_user(session, DEV_ADMIN, password, admin=True)
            session.commit()
            return password
    finally:
        db.close()
