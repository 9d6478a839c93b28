"""`python -m services.gateway [serve|migrate|prepare --admin NAME|user add NAME]`."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys

from shared.runtime import service_process
from shared.settings import GatewaySettings
from shared.telemetry import setup_logging

SERVICE = "gateway"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m services.gateway", description="Agentix HTTP gateway")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the HTTP server (default)")
    for p in (parser, serve):
        p.add_argument("--host", help="listen address (default: AGENTIX_GATEWAY_HOST, 127.0.0.1)")
        p.add_argument("--port", type=int, help="listen port (default: AGENTIX_GATEWAY_PORT, 8080)")
        p.add_argument("--migrate", action="store_true", help="apply database migrations before serving")
    sub.add_parser("migrate", help="apply database migrations (holds a PostgreSQL advisory lock)")
    prepare = sub.add_parser("prepare", help="what `agentix up` runs before the services: apply migrations, "
                                             "create the admin NAME on a fresh database, print one JSON line "
                                             "(revision, the admin's generated password or null, a token)")
    prepare.add_argument("--admin", required=True, metavar="NAME")
    user = sub.add_parser("user", help="manage users")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = user_sub.add_parser("add", help="create a user (or reset their password and role)")
    add.add_argument("name")
    add.add_argument("--admin", action="store_true")
    add.add_argument("--password", help="read from AGENTIX_USER_PASSWORD or a prompt when omitted")
    return parser


def _serve(settings: GatewaySettings, host: str, port: int, migrate_first: bool) -> int:
    import uvicorn

    from services.gateway.app import create_app
    from services.gateway.schema_version import SchemaMismatch

    if migrate_first:
        from services.gateway.migrate import upgrade

        upgrade(settings)
    try:
        app = create_app(settings)
    except SchemaMismatch as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(app, host=host, port=port, log_level=settings.log_level.lower(), access_log=False)
    server = uvicorn.Server(config)
    # A bus side that cannot start (a stream the server refuses) stops the server: exit code 1.
    app.state.stop_serving = lambda: setattr(server, "should_exit", True)
    # uvicorn handles SIGTERM (stop accepting, finish requests, then the lifespan drains the bus
    # side on the service host); the process around it is the same as every other service's.
    with service_process(settings, SERVICE):
        server.run()
    return 1 if app.state.host is not None and app.state.host.startup.failed else 0


def _prepare(settings: GatewaySettings, admin: str) -> int:
    """Everything `agentix up` needs from the gateway's database, in this short-lived process so
    the supervisor never loads the database layer. Log lines go to stderr; the one JSON line on
    stdout is for the supervisor (the password is there once: only on the start that created it)."""
    from services.gateway.access.users import ensure_admin
    from services.gateway.migrate import upgrade
    from shared.auth_tokens import mint_token

    revision = upgrade(settings)
    password = ensure_admin(settings, admin)
    token = mint_token(settings, admin, admin=True)
    print(json.dumps({"revision": revision, "admin": admin, "password": password, "token": token}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = GatewaySettings()
    setup_logging(settings, SERVICE)
    if args.command == "migrate":
        from services.gateway.migrate import upgrade

        revision = upgrade(settings)
        print(f"gateway database at revision {revision}")
        return 0
    if args.command == "prepare":
        return _prepare(settings, args.admin)
    if args.command == "user":
        from services.gateway.access.users import add_user

        password = args.password or os.environ.get("AGENTIX_USER_PASSWORD") or getpass.getpass("password: ")
        try:
            user = add_user(settings, args.name, password, args.admin)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"user {user.name} ({'admin' if user.is_admin else 'user'}) saved")
        return 0
    host = args.host if args.host is not None else settings.gateway_host
    port = args.port if args.port is not None else settings.gateway_port
    return _serve(settings, host, port, args.migrate)


if __name__ == "__main__":
    sys.exit(main())
