"""`agentix approve TASK [--reject] [--comment TEXT]`: decide a waiting approval step."""

from __future__ import annotations

import argparse
import sys

import httpx

from agentix.run import problem_text, resolve_token


def approve(args: argparse.Namespace) -> int:
    headers = {"Authorization": f"Bearer {resolve_token(args.token, args.data_dir)}"}
    body = {"decision": "reject" if args.reject else "approve", "comment": args.comment, "node_id": args.node}
    url = args.url.rstrip("/")
    try:
        resp = httpx.post(f"{url}/api/v1/tasks/{args.task}/approval", json=body, headers=headers, timeout=30)
    except httpx.HTTPError as exc:
        print(f"cannot reach {url}: {exc}", file=sys.stderr)
        return 2
    if resp.status_code != 202:
        print(problem_text(resp), file=sys.stderr)
        return 1
    print(f"task {args.task}: {body['decision']} sent")
    return 0
