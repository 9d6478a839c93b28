"""`agentix status [--watch]`: the admin status page as terminal tables, and the restarts of the
processes a local `agentix up` supervises (from its state file in the data dir)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import httpx

from agentix.run import resolve_token
from agentix.supervision_state import read_state, supervisor_alive


def _table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return f"{title}\n  (none)\n"
    cells = [["" if row.get(c) is None else str(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = "  " + "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([title, line, *body]) + "\n"


def render(status: dict[str, Any]) -> str:
    instances = [
        {**i, "age_s": f"{i.get('age_s', 0):.1f}", "state": "ok" if i.get("healthy") else "STALE",
         "inflight": (i.get("load") or {}).get("inflight")}
        for i in status.get("instances", [])
    ]
    lost = [{**i, "state": "LOST"} for i in status.get("lost", [])]
    infra = [{"probe": name, "ok": probe.get("ok"), "detail": ", ".join(
        f"{k}={v}" for k, v in probe.items() if k != "ok")} for name, probe in status.get("infrastructure", {}).items()]
    tools = [
        {"service": service, "name": tool["name"], "requests": tool.get("requests"), "errors": tool.get("errors"),
         "avg_ms": tool.get("avg_latency_ms")}
        for service, group in status.get("tools", {}).items()
        for tool in group.get("tools", [])
        if tool["name"] != "list_tools"
    ]
    breakers = [
        {"model": model, "state": b.get("state"), "replicas": len(b.get("instances", [])),
         "last_error": next((i.get("last_error") for i in b.get("instances", []) if i.get("last_error")), None)}
        for model, b in status.get("breakers", {}).items()
    ]
    queues = [
        {"queue": name, "waiting": q.get("waiting"), "in_flight": q.get("in_flight"),
         "redelivered": q.get("redelivered"), "dead_letters": q.get("dead_letters"),
         "state": "ok" if q.get("ok") else q.get("error", "unavailable")}
        for name, q in status.get("queues", {}).items()
    ]
    return "\n".join([
        _table("Instances", instances + lost, ["service", "instance", "version", "age_s", "inflight", "state"]),
        _table("Work queues", queues, ["queue", "waiting", "in_flight", "redelivered", "dead_letters", "state"]),
        _table("Infrastructure", infra, ["probe", "ok", "detail"]),
        _table("Tools", tools, ["service", "name", "requests", "errors", "avg_ms"]),
        _table("Model breakers", breakers, ["model", "state", "replicas", "last_error"]),
    ])


def render_supervision(doc: dict[str, Any] | None, now: float | None = None) -> str:
    """The processes `agentix up` supervises, from its state file; empty when there is none."""
    if not doc:
        return ""
    now = time.time() if now is None else now
    rows = [
        {**p, "process": p.get("name"), "pid": p.get("pid") or "-",
         "up_for": f"{now - p['since']:.0f}s" if p.get("since") and p.get("pid") else "-",
         "last_exit": p.get("last_exit") and f"{p['last_exit']} ({now - (p.get('last_exit_at') or now):.0f}s ago)"}
        for p in doc.get("processes", [])
    ]
    pid = doc.get("supervisor_pid")
    title = (f"Supervised by agentix up (pid {pid})" if supervisor_alive(doc)
             else f"Last supervised by agentix up (pid {pid}, no longer running)")
    return _table(title, rows, ["process", "pid", "state", "restarts", "up_for", "last_exit"])


def show_status(args: argparse.Namespace) -> int:
    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    with httpx.Client(base_url=args.url.rstrip("/"), timeout=10) as client:
        while True:
            # Read on every round: the supervisor rewrites it on each start, exit and restart.
            supervision = render_supervision(read_state(Path(args.data_dir)))
            try:
                resp = client.get("/api/v1/admin/status", headers=headers)
            except httpx.HTTPError as exc:
                print(f"cannot reach {args.url}: {exc}\n{supervision}")
                return 2
            if resp.status_code != 200:
                print(f"HTTP {resp.status_code}: {resp.text}\n{supervision}")
                return 1
            text = render(resp.json()) + supervision
            if not args.watch:
                print(text)
                return 0
            print("\033[2J\033[H" + time.strftime("%H:%M:%S") + "\n" + text, flush=True)
            time.sleep(2)
