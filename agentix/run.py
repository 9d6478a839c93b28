"""`agentix run FILE.json`: submit a workflow and show its progress live in the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import httpx

from agentix.sse import follow


def resolve_token(token: str | None, data_dir: str | None) -> str:
    if token:
        return token
    from shared.auth_tokens import mint_token
    from shared.settings import Settings

    settings = Settings(data_dir=Path(data_dir)) if data_dir else Settings()
    if not (settings.jwt_secret or (settings.data_dir / "jwt_secret").exists()):
        raise SystemExit("no token: pass --token, set AGENTIX_TOKEN, or run where `agentix up` keeps its data dir")
    return mint_token(settings, "dev", admin=True)


def _problem(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text
    lines = [f"{body.get('title', 'error')}: {body.get('detail', '')}"]
    for err in body.get("errors") or []:
        where = err.get("node_id") or (f"edge {err['edge_index']}" if "edge_index" in err else "")
        lines.append(f"  - [{err.get('code')}] {where} {err.get('message')}")
    return "\n".join(lines)


class Printer:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.in_tokens = False
        self.token_node: str | None = None

    def out(self, text: str) -> None:
        if self.quiet:
            return
        if self.in_tokens:
            sys.stdout.write("\n")
            self.in_tokens = False
        self.token_node = None
        print(text, flush=True)

    def token(self, node: str, text: str) -> None:
        if self.quiet:
            return
        if node != self.token_node:
            # Parallel nodes stream at once: start a labelled line whenever the speaker changes.
            sys.stdout.write(("\n" if self.in_tokens else "") + f"  [{node}] ")
            self.token_node = node
        sys.stdout.write(text)
        sys.stdout.flush()
        self.in_tokens = True

    def show(self, name: str, d: dict) -> None:
        node = d.get("node_id", "")
        if name == "status":
            self.out(f"● {d['status']}" + (f" — {d['error']}" if d.get("error") else ""))
        elif name == "node.start":
            self.out(f"▶ {node} ({d.get('kind')})")
        elif name == "node.end":
            mark = "✓" if d.get("status") == "done" else "✗"
            extra = f" — {d['error']}" if d.get("error") else ""
            self.out(f"{mark} {node} {d.get('duration_ms', 0):.0f} ms{extra}")
        elif name == "node.skip":
            self.out(f"↷ {node} skipped")
        elif name in ("token", "thinking"):
            self.token(node, d.get("text", ""))
        elif name == "tool.call":
            self.out(f"  ⚙ {d.get('tool')}({json.dumps(d.get('args', {}))[:120]})")
        elif name == "tool.result":
            self.out(f"  ⚙ {'ok' if d.get('ok') else 'error'} {d.get('result_preview') or d.get('error') or ''}"[:160])
        elif name == "branch":
            self.out(f"⑂ {node} → {d.get('handle')}")
        elif name == "approval.request":
            self.out(f"⏸ {node} waits for approval: {d.get('message')}\n"
                     f"  approve with: POST /api/v1/tasks/{d['task_id']}/approval {{\"decision\": \"approve\"}}")
        elif name == "error":
            self.out(f"! {d.get('code')}: {d.get('message')}")
        elif name in ("budget", "eval", "guardrail", "expert.start", "expert.end", "approval.decision"):
            self.out(f"· {name} {json.dumps({k: v for k, v in d.items() if k not in ('task_id', 'ts', 'n')})}")


def run_file(args: argparse.Namespace) -> int:
    try:
        dsl = json.loads(args.file.read_text())
        task_input = json.loads(args.input)
    except (OSError, ValueError) as exc:
        print(f"cannot read input: {exc}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    base = args.url.rstrip("/")
    printer = Printer(args.quiet)
    with httpx.Client(base_url=base, timeout=30) as client:
        try:
            resp = client.post("/api/v1/tasks", json={"dsl": dsl, "input": task_input}, headers=headers)
        except httpx.HTTPError as exc:
            print(f"cannot reach {base}: {exc}", file=sys.stderr)
            return 2
        if resp.status_code != 202:
            print(_problem(resp), file=sys.stderr)
            return 1
        task_id = resp.json()["id"]
        printer.out(f"task {task_id}")
        final: dict = {}
        for ev in follow(client, f"/api/v1/tasks/{task_id}/events", headers):
            printer.show(ev.event, ev.data)
            if ev.event == "done":
                final = ev.data
    printer.in_tokens and printer.out("")
    print(json.dumps(final.get("output"), indent=2, ensure_ascii=False))
    status = final.get("status")
    if status != "done":
        print(f"task ended {status}: {final.get('error') or ''}", file=sys.stderr)
        return 1
    return 0
