"""`agentix key create|list|revoke`: the caller's API keys, as a client of `/api/v1/keys`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

COLUMNS = ("id", "name", "prefix", "scopes", "created_at", "last_used_at", "expires_at", "revoked_at")


def add_key_parser(sub: Any, server_options: Any) -> None:
    key = sub.add_parser("key", help="manage your API keys (long-lived, revocable)")
    key_sub = key.add_subparsers(dest="key_command", required=True)
    create = key_sub.add_parser("create", help="make a key (it is shown once)")
    create.add_argument("--name", required=True)
    create.add_argument("--expires", default=None, metavar="DURATION", help="e.g. 90d, 12h, 2w (default: never)")
    create.add_argument("--scope", action="append", default=None, dest="scopes",
                        help="chat, mcp, api or admin; repeat for several (default: all you may give)")
    server_options(create)
    listing = key_sub.add_parser("list", help="list your keys")
    server_options(listing)
    revoke = key_sub.add_parser("revoke", help="revoke a key: refused at once on every gateway")
    revoke.add_argument("id")
    server_options(revoke)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return ",".join(value) if isinstance(value, list) else str(value)


def key_command(args: argparse.Namespace) -> int:
    import httpx  # here: the parser is built for every command, `agentix up` imports no third-party package

    from agentix.run import problem_text, resolve_token

    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    url = args.url.rstrip("/")
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            if args.key_command == "create":
                body: dict[str, Any] = {"name": args.name, "expires_in": args.expires}
                if args.scopes:
                    body["scopes"] = args.scopes
                resp = client.post("/api/v1/keys", json=body)
            elif args.key_command == "list":
                resp = client.get("/api/v1/keys")
            else:
                resp = client.delete(f"/api/v1/keys/{args.id}")
    except httpx.HTTPError as exc:
        print(f"cannot reach {url}: {exc}", file=sys.stderr)
        return 2
    if resp.status_code >= 400:
        print(problem_text(resp), file=sys.stderr)
        return 1
    out = resp.json()
    if args.key_command == "create":
        print(out["key"])
        print(f"key {out['id']} ({out['prefix']}…, scopes {_cell(out['scopes'])}, expires {_cell(out['expires_at'])}): "
              "keep it now, it is not shown again", file=sys.stderr)
    elif args.key_command == "list":
        rows = [[_cell(item.get(c)) for c in COLUMNS] for item in out["items"]]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
        print("  ".join(c.upper().ljust(w) for c, w in zip(COLUMNS, widths, strict=True)).rstrip())
        for row in rows:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    else:
        print(f"key {out['id']} revoked ({out['gateways_confirmed']} gateway(s) confirmed)")
    return 0
