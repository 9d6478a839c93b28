"""`agentix schedule add|list|pause|resume|run|fires|rm`: the caller's schedules, as a client of
`/api/v1/schedules`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

COLUMNS = ("id", "name", "workflow_id", "when", "enabled", "max_concurrent", "catch_up", "next")
FIRE_COLUMNS = ("fired_at", "outcome", "task_id", "reason")


def add_schedule_parser(sub: Any, server_options: Any) -> None:
    sched = sub.add_parser("schedule", help="manage schedules: workflows that start themselves")
    ss = sched.add_subparsers(dest="schedule_command", required=True)
    add = ss.add_parser("add", aliases=["create"], help="schedule a saved workflow")
    add.add_argument("workflow_id")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="6 fields, seconds first: '0 0 9 * * 1-5'")
    when.add_argument("--every", help="an interval: 30s, 5m, 1h30m")
    when.add_argument("--at", help="one fire at this instant (RFC 3339 with an offset)")
    add.add_argument("--timezone", default="UTC", help="IANA zone the cron is read in")
    add.add_argument("--input", default="{}", help="the workflow input as JSON")
    add.add_argument("--name", default=None)
    add.add_argument("--max-concurrent", type=int, default=1)
    add.add_argument("--catch-up", choices=("skip", "once"), default="skip")
    add.add_argument("--paused", action="store_true", help="make it paused")
    server_options(add)
    listing = ss.add_parser("list", help="list your schedules with their next fire")
    server_options(listing)
    for name, what in (("pause", "stop firing"), ("resume", "fire again"), ("run", "fire now"),
                       ("fires", "the fire history"), ("rm", "remove")):  # fmt: skip
        one = ss.add_parser(name, aliases=["delete"] if name == "rm" else [], help=what)
        one.add_argument("id")
        server_options(one)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> None:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _when(item: dict[str, Any]) -> str:
    if item.get("cron"):
        return f"cron {item['cron']} {item['timezone']}"
    return f"every {item['every']}" if item.get("every") else f"at {item['at']}"


def _request(client: Any, args: argparse.Namespace) -> Any:
    cmd = {"create": "add", "delete": "rm"}.get(args.schedule_command, args.schedule_command)
    if cmd == "add":
        body: dict[str, Any] = {"workflow_id": args.workflow_id, "input": json.loads(args.input), "name": args.name,
                                "max_concurrent": args.max_concurrent, "catch_up": args.catch_up,
                                "enabled": not args.paused}
        for field in ("cron", "every", "at"):
            if getattr(args, field) is not None:
                body[field] = getattr(args, field)
        if args.cron is not None:
            body["timezone"] = args.timezone
        return client.post("/api/v1/schedules", json=body)
    if cmd == "list":
        return client.get("/api/v1/schedules")
    if cmd == "rm":
        return client.delete(f"/api/v1/schedules/{args.id}")
    if cmd == "fires":
        return client.get(f"/api/v1/schedules/{args.id}/fires")
    return client.post(f"/api/v1/schedules/{args.id}/{cmd}")


def schedule_command(args: argparse.Namespace) -> int:
    import httpx  # here: the parser is built for every command, `agentix up` imports no third-party package

    from agentix.run import problem_text, resolve_token

    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    url = args.url.rstrip("/")
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            resp = _request(client, args)
    except json.JSONDecodeError as exc:
        print(f"--input is not JSON: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"cannot reach {url}: {exc}", file=sys.stderr)
        return 2
    if resp.status_code >= 400:
        print(problem_text(resp), file=sys.stderr)
        return 1
    out = resp.json()
    cmd = args.schedule_command
    if cmd == "list":
        _table(COLUMNS, [[_cell(i.get("id")), _cell(i.get("name")), _cell(i.get("workflow_id")), _when(i),
                          _cell(i.get("enabled")), _cell(i.get("max_concurrent")), _cell(i.get("catch_up")),
                          _cell((i.get("next_fire_times") or [None])[0])] for i in out["items"]])
    elif cmd == "fires":
        _table(FIRE_COLUMNS, [[_cell(f.get(c)) for c in FIRE_COLUMNS] for f in out["items"]])
    elif cmd in ("rm", "delete"):
        print(f"schedule {out['id']} removed")
    elif cmd == "run":
        print(out["task_id"])
    else:
        nxt = ", ".join(out.get("next_fire_times") or []) or "none (paused)"
        print(f"schedule {out['id']} ({_when(out)}, {'enabled' if out['enabled'] else 'paused'}); next: {nxt}")
    return 0
