"""`agentix status [--watch]`: the admin status page as terminal tables."""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx

from agentix.run import resolve_token


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return f"{title}\n  (none)\n"
    cells = [[str(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = "  " + "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([title, line, *body]) + "\n"


def render(status: dict[str, Any]) -> str:
    out = [_table("Instances", status.get("instances", []),
                  ["service", "instance", "version", "last_seen", "healthy"])]
    infra = status.get("infrastructure") or status.get("infra") or {}
    out.append(_table("Infrastructure", [{"probe": k, **(v if isinstance(v, dict) else {"ok": v})}
                                         for k, v in infra.items()], ["probe", "ok", "detail"]))
    out.append(_table("Tools", status.get("tools", []), ["service", "name", "requests", "errors", "avg_ms"]))
    out.append(_table("Model breakers", status.get("breakers", []), ["model", "state", "failures", "last_error"]))
    return "\n".join(out)


def show_status(args: argparse.Namespace) -> int:
    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    with httpx.Client(base_url=args.url.rstrip("/"), timeout=10) as client:
        while True:
            resp = client.get("/api/v1/admin/status", headers=headers)
            if resp.status_code != 200:
                print(f"HTTP {resp.status_code}: {resp.text}")
                return 1
            text = render(resp.json())
            if not args.watch:
                print(text)
                return 0
            print("\033[2J\033[H" + time.strftime("%H:%M:%S") + "\n" + text, flush=True)
            time.sleep(2)
