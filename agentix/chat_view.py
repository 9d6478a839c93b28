"""How `agentix chat` shows a run: the answer written token by token as it streams, thinking set
apart, one line per tool step, the plan as a list. Engine-level events (nodes, statuses) are left
to `agentix run`; a chat shows the conversation."""

from __future__ import annotations

import json
import sys
from typing import Any, Literal, TextIO

from agentix.printer import describe

# Events of the engine that say nothing to a person chatting (the run's outcome comes with `done`).
QUIET_EVENTS = frozenset({"status", "node.start", "node.end", "node.skip", "branch", "heartbeat", "done",
                          "approval.request", "approval.decision"})
DIM, RESET = "\x1b[2m", "\x1b[0m"
Open = Literal["", "answer", "thinking"]


class ChatView:
    """Writes one run's events. Streamed text is written as it comes, on a line of its own per
    speaker (the answer, or the model's thinking), so a tool step never lands mid-sentence."""

    def __init__(self, stream: TextIO | None = None, styled: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.styled = self.stream.isatty() if styled is None else styled
        self.open: Open = ""  # what the unfinished line holds
        self.node = ""  # the node whose text it is
        self.answered = False  # answer text was shown in this run
        self.plan_shown = False
        self.tools_announced: set[str] = set()

    def start_run(self) -> None:
        self.end_line()
        self.answered, self.plan_shown = False, False
        self.tools_announced.clear()

    def end_line(self) -> None:
        if self.open:
            self._write("\n")
            self.open, self.node = "", ""

    def line(self, text: str) -> None:
        self.end_line()
        self._write(text + "\n")

    def show(self, name: str, d: dict[str, Any]) -> None:
        node = str(d.get("node_id") or "")
        if name == "token":
            token = str(d.get("text", ""))
            # Marked before the write: a Ctrl-C can land between writing the text and the next line.
            self.answered = self.answered or bool(token)
            self._stream("answer", node, token)
        elif name in ("thinking", "thinking.delta"):  # `thinking` is the single-event form
            self._stream("thinking", node, str(d.get("text", "")))
        elif name == "thinking.start":
            self._begin("thinking", node)
        elif name == "thinking.end":
            if self.open == "thinking":
                self.end_line()
        elif name == "tool.input":
            self._announce_tool(d)
        elif name == "plan":
            self._plan(d)
        elif name == "queued":
            self.line(f"… waiting for {d.get('position')} earlier run(s) of this conversation")
        elif name not in QUIET_EVENTS:
            text = describe(name, d)
            if text is not None:
                self.line(text)

    def _announce_tool(self, d: dict[str, Any]) -> None:
        """`tool.input` streams a call's arguments as the model writes them: say once that it is coming."""
        call = str(d.get("call_id") or d.get("tool") or "")
        if call not in self.tools_announced:
            self.tools_announced.add(call)
            self.line(f"  ⚙ {d.get('tool') or 'a tool'} …")

    def _plan(self, d: dict[str, Any]) -> None:
        steps = d.get("steps")
        if not isinstance(steps, list):
            steps = [d.get("plan") or d.get("text") or json.dumps(d)]
        self.line("plan:")
        for number, step in enumerate(steps, 1):
            self.line(f"  {number}. {_step_text(step)}")
        self.plan_shown = True

    def _begin(self, kind: Open, node: str) -> None:
        if (self.open, self.node) == (kind, node):
            return
        self.end_line()
        self.open, self.node = kind, node
        self._write("agent: " if kind == "answer" else self._dim("(thinking) "))

    def _stream(self, kind: Open, node: str, text: str) -> None:
        if not text:
            return
        self._begin(kind, node)
        self._write(self._dim(text) if kind == "thinking" else text)

    def _dim(self, text: str) -> str:
        return f"{DIM}{text}{RESET}" if self.styled else text

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _step_text(step: Any) -> str:
    if isinstance(step, str):
        return step
    if isinstance(step, dict):
        return str(step.get("title") or step.get("text") or step.get("step") or json.dumps(step))
    return json.dumps(step)
