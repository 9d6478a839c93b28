"""`agentix …` — start the suite, run workflows, chat, mint tokens, manage users, keys and schedules, watch status."""

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


def _server_options(parser: argparse.ArgumentParser) -> None:
    """Where the gateway is and who is asking (a dev admin token is minted from the data dir)."""
    parser.add_argument("--url", default=os.environ.get("AGENTIX_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--token", default=os.environ.get("AGENTIX_TOKEN"))
    parser.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR", ".agentix"),
                        help="where to find the JWT secret when no --token is given")


def _cluster_size(text: str) -> int:
    size = int(text)
    if size < 3:
        # Two nodes cannot keep a JetStream quorum when one of them is down.
        raise argparse.ArgumentTypeError("a cluster needs at least 3 nodes")
    return size


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentix", description="Event-driven AI-agent workflows on NATS.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start NATS and all four services, and restart any that exits")
    up.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR", ".agentix"))
    up.add_argument("--port", type=int, default=8080, help="gateway HTTP port (default 8080)")
    nats = up.add_mutually_exclusive_group()
    nats.add_argument("--nats", default=None, help="use this NATS server instead of starting one")
    nats.add_argument("--cluster", type=_cluster_size, default=0, metavar="N",
                      help="start a local NATS cluster of N nodes (3 or more), JetStream replicas 3, as in production")
    up.add_argument("--host", default="127.0.0.1", help="gateway bind address")

    run = sub.add_parser("run", help="submit a DSL file and follow it live")
    run.add_argument("file", type=Path)
    run.add_argument("--input", default=None,
                     help="task input as JSON (default: the first example of the workflow's input schema)")
    _server_options(run)
    run.add_argument("--quiet", action="store_true", help="print only the final output")

    approve = sub.add_parser("approve", help="approve (or --reject) a task that waits for approval")
    approve.add_argument("task", help="the task id (`agentix run` prints it)")
    approve.add_argument("--reject", action="store_true", help="reject instead of approving")
    approve.add_argument("--comment", default=None, help="a note kept with the decision")
    approve.add_argument("--node", default=None, help="the approval node, when several wait at once")
    _server_options(approve)

    chat = sub.add_parser("chat", help="talk to an agent in the terminal (a conversation of the chat API)")
    chat.add_argument("--conversation", default=None, help="go on with this conversation (default: a new one)")
    chat.add_argument("--mode", choices=("plan", "react", "direct"), default=None,
                      help="how the agent answers (default: the conversation's, react for a new one)")
    chat.add_argument("--model", default=None, help="the model to answer with (default: the failover chain)")
    _server_options(chat)

    token = sub.add_parser("token", help="mint a bearer token")
    token.add_argument("name")
    token.add_argument("--admin", action="store_true")
    token.add_argument("--ttl", type=int, default=None, help="lifetime in seconds")
    token.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR"))

    status = sub.add_parser("status", help="show every service instance, breaker and tool")
    _server_options(status)
    status.add_argument("--watch", action="store_true")

    health = sub.add_parser("health", help="exit 0 when this host's instance of SERVICE answers healthy")
    health.add_argument("service", choices=list(SERVICE_MODULES))

    for name in SERVICE_MODULES:
        # Parsed by the service itself (see `main`): `agentix gateway --port 9000`.
        sub.add_parser(name, help=f"run the {name} service alone (its options follow)", add_help=False)
    user = sub.add_parser("user", help="manage users")
    user_sub = user.add_subparsers(dest="user_command", required=True)
    add = user_sub.add_parser("add", help="create a user, or reset their password and role")
    add.add_argument("name")
    add.add_argument("--admin", action="store_true")
    secret = add.add_mutually_exclusive_group()
    secret.add_argument("--password", help="the password (visible in the process list: prefer --password-stdin)")
    secret.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add.add_argument("--data-dir", default=os.environ.get("AGENTIX_DATA_DIR"))
    sub.add_parser("migrate", help="apply database migrations")
    from agentix.keys import add_key_parser

    add_key_parser(sub, _server_options)
    from agentix.schedules import add_schedule_parser

    add_schedule_parser(sub, _server_options)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SERVICE_MODULES:
        # The service owns its options; argparse would refuse those it does not know.
        return _exec_module(SERVICE_MODULES[argv[0]], argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "up":
        from agentix.up import up

        return up(Path(args.data_dir), args.port, args.nats, args.host, cluster_size=args.cluster)
    if args.command == "run":
        from agentix.run import run_file

        return run_file(args)
    if args.command == "approve":
        from agentix.approve import approve

        return approve(args)
    if args.command == "chat":
        from agentix.chat import chat_command

        return chat_command(args)
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
    if args.command == "user":
        from agentix.users import add_user_command

        return add_user_command(args, _settings(args.data_dir))
    if args.command == "key":
        from agentix.keys import key_command

        return key_command(args)
    if args.command == "schedule":
        from agentix.schedules import schedule_command

        return schedule_command(args)
    if args.command == "migrate":
        return _exec_module("services.gateway", ["migrate"])
    return 2
