"""`agentix run FILE.json`: submit a workflow and show its progress live in the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from agentix.printer import Printer
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


def problem_text(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text
    lines = [f"{body.get('title', 'error')}: {body.get('detail', '')}"]
    for err in body.get("errors") or []:
        where = err.get("node_id") or (f"edge {err['edge_index']}" if "edge_index" in err else err.get("field", ""))
        lines.append(f"  - [{err.get('code')}] {where} {err.get('message')}")
    return "\n".join(lines)


def sample_input(dsl: Any) -> dict[str, Any] | None:
    """The first of the input schema's `examples` (JSON Schema's own keyword), if it has one."""
    for node in (dsl.get("nodes") or []) if isinstance(dsl, dict) else []:
        if isinstance(node, dict) and node.get("kind") == "input":
            schema = (node.get("config") or {}).get("schema") or {}
            examples = schema.get("examples") if isinstance(schema, dict) else None
            if isinstance(examples, list) and examples and isinstance(examples[0], dict):
                return examples[0]
    return None


def _read(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    dsl = json.loads(args.file.read_text())
    if args.input is not None:
        return dsl, json.loads(args.input)
    sample = sample_input(dsl)
    if sample is None:
        return dsl, {}
    if not args.quiet:
        print(f"input (the workflow's example; give your own with --input): {json.dumps(sample)}", flush=True)
    return dsl, sample


def _ask_approval(client: httpx.Client, headers: dict[str, str], task_id: str, event: dict[str, Any]) -> None:
    """On a terminal, answer an approval request inline; elsewhere, say how to answer it."""
    if not sys.stdin.isatty():
        print(f"  approve with: agentix approve {task_id} [--reject] [--comment TEXT]", flush=True)
        return
    try:
        answer = input(f"  approve {event.get('node_id')}? [y/n] ").strip().lower()
    except EOFError:
        return
    decision = "approve" if answer in ("y", "yes") else "reject"
    body = {"decision": decision, "node_id": event.get("node_id")}
    resp = client.post(f"/api/v1/tasks/{task_id}/approval", json=body, headers=headers)
    if resp.status_code != 202:
        print(problem_text(resp), file=sys.stderr, flush=True)


def run_file(args: argparse.Namespace) -> int:
    try:
        dsl, task_input = _read(args)
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
            print(problem_text(resp), file=sys.stderr)
            return 1
        task_id = resp.json()["id"]
        printer.out(f"task {task_id}")
        final: dict[str, Any] = {}
        for ev in follow(client, f"/api/v1/tasks/{task_id}/events", headers):
            printer.show(ev.event, ev.data)
            if ev.event == "approval.request":
                _ask_approval(client, headers, task_id, ev.data)
            if ev.event == "done":
                final = ev.data
    printer.flush()
    status = final.get("status")
    if status == "done" or final.get("output") is not None:
        print(json.dumps(final.get("output"), indent=2, ensure_ascii=False))
    if status != "done":
        print(f"task ended {status}: {final.get('error') or ''}", file=sys.stderr)
        return 1
    return 0
