"""`agentix …` — start the suite, run workflows, mint tokens, manage users, watch status."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SERVICE_MODULES = {
    "gateway": "services.gateway",
    "dispatcher": "services.dispatcher",
    "tools-go": "services.tools_go_equiv",
    "tools-py": "services.tools_py",
}


def _exec_module(module: str, args: list[str]) -> int:
    """Run a service in this process's place, so signals reach it directly."""
    os.execv(sys.executable, [sys.executable, "-m", module, *args])
    return 0  # pragma: no cover - execv does not return


def _settings(data_dir: str | None):
    from shared.settings import Settings

    return Settings(data_dir=Path(data_dir)) if data_dir else Settings()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentix", description="Event-driven AI-agent workflows on NATS.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start NATS and all four services (embedded mode)")
    up.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR", ".agentix"))
    up.add_argument("--port", type=int, default=8080, help="gateway HTTP port (default 8080)")
    up.add_argument("--nats", default=None, help="use this NATS server instead of starting one")
    up.add_argument("--host", default="127.0.0.1", help="gateway bind address")

    run = sub.add_parser("run", help="submit a DSL file and follow it live")
    run.add_argument("file", type=Path)
    run.add_argument("--input", default="{}", help="task input as JSON")
    run.add_argument("--url", default=os.environ.get("AGENTIX_URL", "http://127.0.0.1:8080"))
    run.add_argument("--token", default=os.environ.get("AGENTIX_TOKEN"))
    run.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR", ".agentix"),
                     help="where to find the JWT secret when no --token is given")
    run.add_argument("--quiet", action="store_true", help="print only the final output")

    token = sub.add_parser("token", help="mint a bearer token")
    token.add_argument("name")
    token.add_argument("--admin", action="store_true")
    token.add_argument("--ttl", type=int, default=None, help="lifetime in seconds")
    token.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR"))

    status = sub.add_parser("status", help="show every service instance, breaker and tool")
    status.add_argument("--url", default=os.environ.get("AGENTIX_URL", "http://127.0.0.1:8080"))
    status.add_argument("--token", default=os.environ.get("AGENTIX_TOKEN"))
    status.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR", ".agentix"))
    status.add_argument("--watch", action="store_true")

    health = sub.add_parser("health", help="exit 0 when this host's instance of SERVICE answers healthy")
    health.add_argument("service", choices=list(SERVICE_MODULES))

    for name in SERVICE_MODULES:
        svc = sub.add_parser(name, help=f"run the {name} service alone")
        svc.add_argument("args", nargs=argparse.REMAINDER)
    user = sub.add_parser("user", help="manage users (add NAME [--admin] [--password P])")
    user.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("migrate", help="apply database migrations")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        from agentix.up import up

        return up(Path(args.data_dir), args.port, args.nats, args.host)
    if args.command == "run":
        from agentix.run import run_file

        return run_file(args)
    if args.command == "token":
        from shared.auth_tokens import mint_token

        print(mint_token(_settings(args.data_dir), args.name, admin=args.admin, ttl_s=args.ttl))
        return 0
    if args.command == "status":
        from agentix.status import show_status

        return show_status(args)
    if args.command == "health":
        from agentix.health import check_local_health

        return check_local_health(args.service)
    if args.command in SERVICE_MODULES:
        return _exec_module(SERVICE_MODULES[args.command], args.args)
    if args.command == "user":
        return _exec_module("services.gateway", ["user", *args.args])
    if args.command == "migrate":
        return _exec_module("services.gateway", ["migrate"])
    return 2
