"""A chat run's event log as a LangGraph run stream: the `/lg` translator of the run feed.

Frames, in order: `metadata {run_id, attempt}` and the `values` the run starts from (the
opening); then, per event of the log, what the asked `stream_mode`s make of it — `messages`
(messages-tuple: each token as an `AIMessageChunk` with `{langgraph_node, run_id, thread_id}`),
`updates` (`{node: …}` when a node ends), `values` (the whole state when the run ends or waits),
`custom` (every Agentix event with no LangGraph counterpart: tool calls and results, thinking,
`queued`, approval decisions, errors…); last `end`, or `error` when the run failed.

A run that reaches an approval stops here with the interrupt (`__interrupt__: [{value, id}]` in
`values` and `updates`) and `end`; the run that resumes it streams on from there. Which approval
the run waits on is read from the log: a request followed by the run's parking (`status:
waiting`) with nothing after it in what is stored so far.

Frame ids are resumable: `<n>` or `<n>.<k>` is the k-th frame made of the log's event n (the
opening of a stream starting after event s is `s.8`, `s.9`). A reader that comes back with
`Last-Event-ID` gets the frames after that one: the log is read again from its start (the state a
frame shows depends on what came before) and what the reader had is skipped. `end` and `error`
have no id: they close the stream, after the run's record agrees with them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from services.gateway.chat.answers import RunTrace, error_sentence
from services.gateway.chat.modes import ANSWER_NODE
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import messages
from services.gateway.protocols.langgraph.stream_modes import EXTRA_MODES, ModeFrames
from services.gateway.runs.frames import Entry
from shared.contract.events import (
    AnyEvent,
    ApprovalRequestEvent,
    DoneEvent,
    NodeEndEvent,
    NodeSkipEvent,
    NodeStartEvent,
    StatusEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from shared.contract.task import FAULTED

FrameId = tuple[int, int]
OPENING_K: Final = 8  # the opening's frames are `s.8`, `s.9`: after every frame event s itself makes
MODES: Final = frozenset({"values", "updates", "messages-tuple", "custom"}) | EXTRA_MODES
DEFAULT_MODES: Final = ("values",)
_SILENT: Final = (StatusEvent, NodeStartEvent, NodeSkipEvent)  # the lifecycle LangGraph has no frame for


def parse_id(raw: str | None) -> FrameId | None:
    if raw in (None, "", "-1"):  # "-1": LangGraph's "from the start" (useStream's rejoin after a reload)
        return None
    head, _, tail = str(raw).strip().partition(".")
    try:
        n, k = int(head), int(tail or 0)
    except ValueError as exc:
        raise ApiProblem(400, "Bad Request", "Last-Event-ID must be `<n>` or `<n>.<k>`.") from exc
    if n < 0 or k < 0:
        raise ApiProblem(400, "Bad Request", "Last-Event-ID must be `<n>` or `<n>.<k>`.")
    return n, k


def format_id(frame_id: FrameId) -> str:
    n, k = frame_id
    return str(n) if k == 0 else f"{n}.{k}"


def encode(frame_id: FrameId | None, event: str, data: Any) -> bytes:
    head = f"id: {format_id(frame_id)}\n" if frame_id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


def interrupt_of(run_id: str, event: ApprovalRequestEvent) -> dict[str, Any]:
    """An approval as a LangGraph interrupt; answer it with a run whose `command.resume` is
    `"approve"`/`true` or `"reject"`/`false` (or `{decision, comment?}`). A high-risk tool call's
    shows the call (`tool`, `call_id`, `args`), so a client can show what it approves; its id
    names the call, because one agent node may ask again for its next call. `action_requests`
    and `review_configs` are the LangChain v1 human-in-the-loop middleware's shape (answered with
    `{decisions: [{type: approve|edit|reject, edited_action?, message?}]}`), as agent-chat-ui
    renders it."""
    action = event.tool if event.call_id is not None and event.tool else event.node_id
    # A tool call's arguments can be edited; an approval node (a plan) has none.
    allowed = ["approve", "edit", "reject"] if event.call_id is not None else ["approve", "reject"]
    value: dict[str, Any] = {"kind": "approval", "message": event.message, "node_id": event.node_id,
                             "run_id": run_id,
                             "action_requests": [{"name": action, "args": event.args if event.call_id else {},
                                                  "description": event.message}],
                             "review_configs": [{"action_name": action, "allowed_decisions": allowed}]}
    if event.call_id is None:
        return {"value": value, "id": f"{run_id}:{event.node_id}"}
    value.update(tool=event.tool, call_id=event.call_id, args=event.args)
    return {"value": value, "id": f"{run_id}:{event.node_id}:{event.call_id}"}


@dataclass
class RunStream:
    """One run's frames, made from its events in order (pure: no I/O)."""

    run_id: str
    thread_id: str
    before: list[dict[str, Any]]  # the thread's messages this run starts from (its question included)
    modes: frozenset[str] = frozenset(DEFAULT_MODES)
    parent: str | None = None  # its checkpoint's parent: its question's (checkpoints.py), or the turn before
    step: int = 0  # its checkpoint's depth on its branch
    asked_from: str | None = None  # the parent of its question's checkpoint, when the run made that one
    trace: RunTrace = field(default_factory=RunTrace)
    extra: ModeFrames | None = field(default=None, init=False)  # the extra modes' frames, when asked

    def __post_init__(self) -> None:
        if self.modes & EXTRA_MODES:
            self.extra = ModeFrames(self.run_id, self.thread_id, self.parent, self.step, self.modes, self.asked_from)

    def state(self, interrupt: dict[str, Any] | None = None) -> dict[str, Any]:
        said = list(self.before)
        answer = self.trace.answer if self.trace.status == "done" else self.trace.partial
        if answer:
            said.append(messages.ai(messages.answer_id(self.run_id), answer, model=self.trace.model,
                                    usage=self.trace.usage,
                                    message_type="text" if self.trace.status in (None, "done") else "interrupted"))
        values: dict[str, Any] = {"messages": said}
        if interrupt is not None:
            values["__interrupt__"] = [interrupt]
        return values

    def opening(self) -> list[tuple[str, Any]]:
        frames: list[tuple[str, Any]] = [("metadata", {"run_id": self.run_id, "attempt": 1})]
        if "values" in self.modes:
            frames.append(("values", self.state()))
        if self.extra is not None:
            frames.extend(self.extra.opening(self.state()))
        return frames

    def _update(self, event: NodeEndEvent) -> dict[str, Any]:
        """What a node that ended `done` wrote."""
        if event.node_id == ANSWER_NODE:
            answer = "".join(self.trace.tokens.get(ANSWER_NODE, [])) or (event.output_preview or "")
            return {"messages": [messages.ai(messages.answer_id(self.run_id), answer, model=self.trace.model)]}
        return {"output": event.output_preview}

    def frames(self, event: AnyEvent) -> list[tuple[str, Any]]:
        """What one event makes; `interrupted` frames for a pending approval come from `interrupt`."""
        self.trace.add(event)
        out: list[tuple[str, Any]] = []
        if isinstance(event, TokenEvent):
            if "messages-tuple" in self.modes:
                node = event.node_id or ANSWER_NODE
                chunk = messages.ai(messages.answer_id(self.run_id, None if node == ANSWER_NODE else node),
                                    event.text, model=event.model, chunk=True)
                meta = {"langgraph_node": node, "run_id": self.run_id, "thread_id": self.thread_id,
                        "ls_model_name": event.model}
                out.append(("messages", [chunk, meta]))
            if self.extra is not None:
                out.extend(self.extra.token(event))
        elif isinstance(event, NodeEndEvent):
            update = self._update(event) if event.status == "done" and event.node_id else None
            if "updates" in self.modes and update is not None:
                out.append(("updates", {event.node_id: update}))
            if self.extra is not None:
                out.extend(self.extra.node_end(event, update))
        elif isinstance(event, NodeStartEvent) and self.extra is not None:
            out.extend(self.extra.node_start(event))
        elif isinstance(event, DoneEvent):
            state = self.state()
            if "values" in self.modes:
                out.append(("values", state))
            if self.extra is not None:
                out.extend(self.extra.checkpoint(state, event) + self.extra.closing(state))
            out.append(self.ending())
        elif isinstance(event, ApprovalRequestEvent):
            pass  # pending or not is known only by looking further: see `interrupted`
        elif not isinstance(event, _SILENT) and "custom" in self.modes:
            out.append(("custom", {"type": event.type, **event.model_dump(mode="json", exclude_none=True,
                                                                          exclude={"type", "task_id"})}))
        if isinstance(event, ToolCallEvent | ToolResultEvent) and self.extra is not None:
            out.extend(self.extra.tool(event))
        return out

    def interrupted(self, event: ApprovalRequestEvent) -> list[tuple[str, Any]]:
        interrupt = interrupt_of(self.run_id, event)
        out: list[tuple[str, Any]] = []
        if "updates" in self.modes:
            out.append(("updates", {"__interrupt__": [interrupt]}))
        if "values" in self.modes:
            out.append(("values", self.state(interrupt)))
        if self.extra is not None:
            out.extend(self.extra.checkpoint(self.state(), event, interrupt))
        return out

    def ending(self) -> tuple[str, Any]:
        status = self.trace.status
        if status in FAULTED:
            return "error", {"error": self.trace.code or status,
                             "message": error_sentence(status, self.trace.code, self.trace.error)}
        return "end", None


def modes_of(stream_mode: str | Iterable[str] | None) -> frozenset[str]:
    """The asked modes Agentix streams (`messages-tuple`'s frames are named `messages`; the
    legacy `messages` mode's are `messages/partial` and the like); others send nothing."""
    asked = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode or ())
    return frozenset(m for m in asked if m in MODES) if any(asked) else frozenset(DEFAULT_MODES)


class LgFrames:
    """The run feed's translator for a LangGraph run stream (see the module docstring): frames
    after `after` (a frame id), for a stream that opens after the log's event `opening_at` (a
    resumed run's: its approval request)."""

    def __init__(self, stream: RunStream, after: FrameId | None = None, opening_at: int = 0) -> None:
        self.stream = stream
        self.after = after
        self.opening_at = opening_at
        self.waiting_on: ApprovalRequestEvent | None = None  # the approval the run parked on
        self.values: dict[str, Any] | None = None  # the thread's values once the run ended or waits
        self._parked_at = 0  # the `n` of the parking after `asked`; 0: not parked on it
        self._asked: ApprovalRequestEvent | None = None
        self._closing: tuple[str, Any] | None = None

    @property
    def after_seq(self) -> int:
        return 0  # a frame's state depends on everything before it: always from the log's start

    @property
    def finished(self) -> bool:
        return self._closing is not None

    def _fresh(self, frame_id: FrameId) -> bool:
        return self.after is None or frame_id > self.after

    def _encode(self, n: int, made: list[tuple[str, Any]]) -> bytes:
        out: list[bytes] = []
        for k, (name, data) in enumerate(made):
            if name in ("end", "error"):
                self._closing = (name, data)
                break
            if self._fresh((n, k)):
                out.append(encode((n, k), name, data))
        return b"".join(out)

    def opening(self) -> bytes:
        return b"".join(encode((self.opening_at, k), name, data)
                        for k, (name, data) in enumerate(self.stream.opening(), start=OPENING_K)
                        if self._fresh((self.opening_at, k)))

    def frames(self, entry: Entry) -> bytes:
        event = entry.event
        if self._parked_at and event.n > self._parked_at:
            self._asked, self._parked_at = None, 0  # the run went on: that approval was answered
        if isinstance(event, ApprovalRequestEvent) and event.n > self.opening_at:
            self._asked = event
        elif isinstance(event, StatusEvent) and event.status == "waiting" and self._asked is not None:
            self._parked_at = event.n
        made = self.stream.frames(event)
        if isinstance(event, DoneEvent):
            name, data = self.stream.ending()
            self.values = {"__error__": data} if name == "error" else self.stream.state()
        return self._encode(event.n, made)

    def caught_up(self) -> bytes:
        """Everything stored so far is read: a run parked on an approval stops its stream here."""
        asked = self._asked
        if not self._parked_at or asked is None:
            return b""
        self.waiting_on = asked
        made = self.stream.interrupted(asked)
        self.values = self.stream.state(interrupt_of(self.stream.run_id, asked))
        body = self._encode(self._parked_at, made)
        self._closing = ("end", None)
        return body

    def closing(self) -> bytes:
        if self._closing is None:
            return b""
        name, data = self._closing
        return encode(None, name, data)
