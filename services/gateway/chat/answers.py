"""What a finished run leaves in its conversation, read back from the run's event log (the
task's events stream): the final answer, or the partial text the user saw, the tool steps, the
thinking, usage and model — and, for a failure, a clear sentence saying why; written as the
assistant's side of the turn (`write_answer`) and the conversation's running summary."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session

from services.gateway.chat import memory, messages
from services.gateway.chat.memory import SUMMARY_NODE
from services.gateway.chat.modes import ANSWER_NODE, OUTPUT_NODE
from services.gateway.chat.tables import ChatRun, Conversation
from services.gateway.tables import Task
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.events import (
    AnyEvent,
    DoneEvent,
    ErrorEvent,
    StatusEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from shared.contract.task import FAULTED

_RETRY_AFTER = re.compile(r"retry[ -]?after\D{0,12}(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s*(?:s\b|sec|second)", re.I)


@dataclass
class RunTrace:
    """A run's event log, summed up."""

    status: str | None = None
    output: Any = None
    error: str | None = None
    code: str | None = None
    tokens: dict[str, list[str]] = field(default_factory=dict)  # node id → streamed text pieces
    last_streaming_node: str | None = None
    thinking: dict[str, list[str]] = field(default_factory=dict)
    tool_events: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    model: str | None = None
    _calls: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # call id → its step

    @property
    def partial(self) -> str:
        """What the user saw of the answer being written when the run stopped."""
        return "".join(self.tokens.get(self.last_streaming_node or "", []))

    @property
    def answer(self) -> str:
        value = self.output.get(OUTPUT_NODE) if isinstance(self.output, dict) else self.output
        if value is None:
            return "".join(self.tokens.get(ANSWER_NODE, []))
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    @property
    def thinking_text(self) -> str | None:
        text = "".join(self.thinking.get(self.last_streaming_node or ANSWER_NODE, []))
        return text or None

    def add(self, event: AnyEvent) -> None:
        """Fold one event of the log in (in stream order)."""
        if isinstance(event, TokenEvent) and event.node_id and event.node_id != SUMMARY_NODE:
            # The summary being folded is memory, never a partial answer.
            self.tokens.setdefault(event.node_id, []).append(event.text)
            self.last_streaming_node = event.node_id
            self.model = event.model or self.model
        elif isinstance(event, ThinkingEvent) and event.node_id:
            self.thinking.setdefault(event.node_id, []).append(event.text)
        elif isinstance(event, ToolCallEvent):
            step = {"call_id": event.call_id, "name": event.tool, "input": event.args, "node_id": event.node_id}
            self._calls[event.call_id] = step
            self.tool_events.append(step)
        elif isinstance(event, ToolResultEvent) and event.call_id in self._calls:
            self._calls[event.call_id].update(ok=event.ok, duration_ms=event.duration_ms,
                                              result=event.result if event.result is not None else event.result_preview,
                                              error=event.error)
        elif isinstance(event, StatusEvent) and event.error:
            self.error, self.code = event.error, event.code
        elif isinstance(event, DoneEvent):
            self.status, self.output = event.status, event.output
            self.error = event.error or self.error
            if event.usage is not None:
                self.usage = event.usage.model_dump(mode="json")
                self.model = event.usage.models[-1] if event.usage.models else self.model


async def read_trace(bus: Bus, run_id: str) -> RunTrace:
    trace = RunTrace()
    async for _, event in read_events(bus, run_id, follow=False):
        trace.add(event)
    return trace


def error_sentence(status: str | None, code: str | None, error: str | None) -> str:
    """A failure said plainly, from the task's error code (the model failures of DSL.md)."""
    text = error or ""
    if status == "budget_exceeded" or code == "budget_exceeded":
        return "The token budget of this answer is exhausted."
    if code == "rate_limited":
        match = _RETRY_AFTER.search(text)
        wait = match.group(1) or match.group(2) if match else None
        return f"The model is rate limited — retry in {wait} s." if wait else \
            "The model is rate limited — retry in a few seconds."
    if code == "timeout" or status == "timeout":
        return "The model timed out."
    if code == "model_not_found":
        return f"Unknown model id. {text}".strip()
    if code == "auth":
        return "The model provider refused the API key."
    if code == "stream_broken":
        return "The model's answer broke off mid-stream."
    return text or f"The run ended {status or 'with an error'}."


def error_event(event: AnyEvent) -> ErrorEvent | None:
    """What a run's stream adds after the `status` its task failed with: `error {code, message}`
    with the sentence its `error` message says (before `done`, so a live client shows it)."""
    if not isinstance(event, StatusEvent) or event.status not in FAULTED:
        return None
    return ErrorEvent(task_id=event.task_id, n=event.n, ts=event.ts, code=event.code or event.status,
                      message=error_sentence(event.status, event.code, event.error))


def write_answer(session: Session, run: ChatRun, trace: RunTrace) -> None:
    """The assistant's side of the turn: the answer; or what was shown of it (`interrupted`,
    with the tool steps so far) and, for a failure, an `error` message saying why."""
    fields = {"tool_events": trace.tool_events, "thinking": trace.thinking_text, "usage": trace.usage,
              "model": trace.model}
    if run.state == "succeeded":
        messages.add(session, run.conversation_id, run.id, run.seq, "assistant", trace.answer, **fields)
        return
    if trace.partial or trace.tool_events:
        messages.add(session, run.conversation_id, run.id, run.seq, "assistant", trace.partial,
                     message_type="interrupted", **fields)
    if run.state in ("failed", "budget_exceeded"):
        messages.add(session, run.conversation_id, run.id, run.seq, "assistant",
                     error_sentence(trace.status, trace.code, trace.error), message_type="error", model=trace.model)


def keep_summary(session: Session, conversation: Conversation, task: Task | None, trace: RunTrace) -> None:
    """Store the running summary the run folded, unless a later one is stored already."""
    made = memory.made_summary(task.input if task else None, trace.output)
    if made is not None and made[1] > conversation.summarized:
        conversation.summary, conversation.summarized = made
        session.add(conversation)
