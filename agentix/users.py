"""`agentix user add NAME`."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.settings import Settings


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
    from services.gateway.access.users import add_user
    from services.gateway.schema_version import SchemaMismatch

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
