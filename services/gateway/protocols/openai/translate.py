"""A run's events, said the way OpenAI's chat completions say an answer: text as `content`,
thinking (and a plan being written) as `reasoning_content`, and how it ended as a
`finish_reason`, usage, or an error. One translator serves the stream and the whole completion.

A call of one of the client's own tools (`tool.call` with `client: true`) is a `tool_calls`
entry, and the answer then ends with `tool_calls`.

Endings: `done` → `stop`; `budget_exceeded` → `length` (the text so far stands); a run that waits
for a human approval → `stop` with a last paragraph naming the run and where to approve it (an
OpenAI client cannot answer an approval); failed, timed out, cancelled or interrupted → an error
(the chat's plain sentence for it, see API.md "Conversations")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from services.gateway.chat.answers import error_sentence
from services.gateway.chat.modes import OUTPUT_NODE, PLAN_NODE
from services.gateway.protocols.openai.errors import error_body
from services.gateway.protocols.openai.start import Started
from shared.contract.events import (
    AnyEvent,
    ApprovalRequestEvent,
    DoneEvent,
    StatusEvent,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
)
from shared.contract.models import Usage

_FINISH = {"done": "stop", "budget_exceeded": "length"}
# A model failure's task error code → the HTTP status a whole (non-streamed) completion fails with.
_STATUS = {"rate_limited": 429, "timeout": 504, "cancelled": 409}


@dataclass
class Delta:
    content: str | None = None
    reasoning: str | None = None
    tool_call: dict[str, Any] | None = None  # one whole call, with its `index`

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.content is not None:
            out["content"] = self.content
        if self.reasoning is not None:
            out["reasoning_content"] = self.reasoning
        if self.tool_call is not None:
            out["tool_calls"] = [self.tool_call]
        return out


def tool_call_of(event: ToolCallEvent) -> dict[str, Any]:
    """A client tool call as OpenAI's `tool_calls` entry (arguments as JSON text)."""
    return {"id": event.call_id, "type": "function",
            "function": {"name": event.tool, "arguments": json.dumps(event.args, ensure_ascii=False)}}


@dataclass
class Ending:
    finish_reason: str | None = None  # None: it ended in an error
    error: dict[str, Any] | None = None  # OpenAI's error body
    status: int = 500  # for a whole completion that failed
    tail: str | None = None  # the last words, when the run itself did not say them
    usage: Usage | None = None


def answer_of(output: Any) -> str | None:
    """The final answer in a `done` event's output: the built-in graph's `answer`, a workflow's
    only output, else all its outputs as JSON."""
    if isinstance(output, dict):
        if OUTPUT_NODE in output and len(output) == 1:
            output = output[OUTPUT_NODE]
        elif len(output) == 1:
            output = next(iter(output.values()))
    if output is None:
        return None
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def approval_note(started: Started, asked: str | None) -> str:
    what = f" ({asked.strip()})" if asked and asked.strip() else ""
    return (f"\n\n[Agentix] Run {started.run_id} waits for a human approval{what}. An OpenAI client cannot "
            f"answer it: approve or reject it in the Agentix console, or with POST {started.approval_route} "
            '{"decision": "approve"}' + (" — the answer then arrives in the conversation." if
                                         started.conversation_id else "."))


@dataclass
class Translator:
    started: Started
    reasoning_nodes: frozenset[str] = frozenset()
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the client's tools the model called
    ending: Ending | None = None
    _asked: str | None = None
    _code: str | None = None

    @classmethod
    def for_mode(cls, started: Started, mode: str | None) -> Translator:
        return cls(started, frozenset({PLAN_NODE}) if mode == "plan" else frozenset())

    def feed(self, event: AnyEvent) -> Delta | None:
        """The delta this event adds to the answer, if any; sets `ending` when the answer ends."""
        if isinstance(event, TokenEvent) and event.text:
            if event.node_id in self.reasoning_nodes:
                self.reasoning.append(event.text)
                return Delta(reasoning=event.text)
            self.content.append(event.text)
            return Delta(content=event.text)
        if isinstance(event, ThinkingEvent) and event.text:
            self.reasoning.append(event.text)
            return Delta(reasoning=event.text)
        if isinstance(event, ToolCallEvent) and event.client:
            self.tool_calls.append(tool_call_of(event))
            return Delta(tool_call={"index": len(self.tool_calls) - 1, **self.tool_calls[-1]})
        if isinstance(event, ApprovalRequestEvent):
            self._asked = event.message
        elif isinstance(event, StatusEvent):
            self._code = event.code or self._code
            if event.status == "waiting":
                self.ending = Ending("stop", tail=approval_note(self.started, self._asked), usage=event.usage)
        elif isinstance(event, DoneEvent):
            self.ending = self._ended(event)
        return None

    def _ended(self, event: DoneEvent) -> Ending:
        if event.status == "done" and self.tool_calls:
            return Ending("tool_calls", usage=event.usage)
        if event.status in _FINISH:
            answer = answer_of(event.output) if event.status == "done" else None
            # Said only when nothing was streamed as text (a workflow without a streaming agent).
            tail = answer if answer and not self.content else None
            return Ending(_FINISH[event.status], tail=tail, usage=event.usage)
        code = self._code or event.status
        message = error_sentence(event.status, code, event.error)
        if event.status == "cancelled":
            message = f"Run {self.started.run_id} was cancelled{': ' + event.error if event.error else '.'}"
            code = "cancelled"
        status = _STATUS.get(code, 504 if event.status == "timeout" else 500)
        return Ending(error=error_body(message, status, code), status=status, usage=event.usage)

    @property
    def text(self) -> str:
        return "".join(self.content) + ((self.ending.tail or "") if self.ending else "")
