"""How `agentix run` shows a task's events in the terminal, one whole line at a time."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

# Events shown as their JSON fields, without the fields every event carries.
PLAIN_EVENTS = ("budget", "eval", "guardrail", "expert.start", "expert.end", "approval.decision")
COMMON_FIELDS = ("task_id", "ts", "n")


class Printer:
    """Prints events as lines. Streamed text is kept per node until a line is complete: parallel
    nodes stream at once, and writing their fragments as they come would interleave them."""

    def __init__(self, quiet: bool, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stdout
        self.pending: dict[str, str] = {}  # node id -> text of its unfinished line

    def out(self, text: str) -> None:
        if self.quiet:
            return
        print(text, file=self.stream, flush=True)

    def token(self, node: str, text: str) -> None:
        if self.quiet:
            return
        *lines, rest = (self.pending.get(node, "") + text).split("\n")
        for line in lines:
            self.out(f"  [{node}] {line}")
        self.pending[node] = rest

    def flush(self, node: str | None = None) -> None:
        """Print what is left of a node's streamed text (every node's when `node` is None)."""
        for name in [node] if node is not None else list(self.pending):
            rest = self.pending.pop(name, "")
            if rest:
                self.out(f"  [{name}] {rest}")

    def show(self, name: str, d: dict[str, Any]) -> None:
        node = d.get("node_id", "")
        if name in ("token", "thinking.delta"):
            self.token(node, d.get("text", ""))
            return
        if name in ("thinking.start", "thinking.end", "tool.input"):
            return  # stream markers and argument pieces: `tool.call` shows the whole call
        # Any other event of a node ends its streamed text; a task-level event ends everyone's.
        self.flush(node or None)
        line = describe(name, d)
        if line is not None:
            self.out(line)


def describe(name: str, d: dict[str, Any]) -> str | None:
    """One line for an event that is not streamed text (None: nothing to show for it)."""
    node = d.get("node_id", "")
    if name == "status":
        return f"● {d['status']}" + (f" — {d['error']}" if d.get("error") else "")
    if name == "node.start":
        return f"▶ {node} ({d.get('kind')})"
    if name == "node.end":
        mark = "✓" if d.get("status") == "done" else "✗"
        extra = f" — {d['error']}" if d.get("error") else ""
        return f"{mark} {node} {d.get('duration_ms', 0):.0f} ms{extra}"
    if name == "node.skip":
        return f"↷ {node} skipped"
    if name == "tool.call":
        return f"  ⚙ {d.get('tool')}({json.dumps(d.get('args', {}))[:120]})"
    if name == "tool.result":
        return f"  ⚙ {'ok' if d.get('ok') else 'error'} {d.get('result_preview') or d.get('error') or ''}"[:160]
    if name == "branch":
        return f"⑂ {node} → {d.get('handle')}"
    if name == "approval.request":
        return f"⏸ {node} waits for approval: {d.get('message')}"
    if name == "error":
        return f"! {d.get('code')}: {d.get('message')}"
    if name in PLAIN_EVENTS:
        return f"· {name} {json.dumps({k: v for k, v in d.items() if k not in COMMON_FIELDS})}"
    return None
