"""A chat run's event log as a LangGraph run stream.

Frames, in order: `metadata {run_id, attempt}` and the `values` the run starts from (the
opening); then, per event of the log, what the asked `stream_mode`s make of it — `messages`
(messages-tuple: each token as an `AIMessageChunk` with `{langgraph_node, run_id, thread_id}`),
`updates` (`{node: …}` when a node ends), `values` (the whole state when the run ends or waits),
`custom` (every Agentix event with no LangGraph counterpart: tool calls and results, thinking,
`queued`, approval decisions, errors…); last `end`, or `error` when the run failed.

A run that reaches an approval stops here with the interrupt (`__interrupt__: [{value, id}]` in
`values` and `updates`) and `end`; the run that resumes it streams on from there.

Frame ids are resumable: `<n>` or `<n>.<k>` is the k-th frame made of the log's event n (the
opening of a stream starting after event s is `s.8`, `s.9`). A reader that comes back with
`Last-Event-ID` gets the frames after that one: the log is read again from its start (the state a
frame shows depends on what came before) and what the reader had is skipped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from services.gateway.chat.answers import RunTrace, error_sentence
from services.gateway.chat.modes import ANSWER_NODE
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import messages
from shared.bus import Bus
from shared.bus.events import last_event, read_events
from shared.contract.events import (
    AnyEvent,
    ApprovalRequestEvent,
    DoneEvent,
    NodeEndEvent,
    NodeSkipEvent,
    NodeStartEvent,
    StatusEvent,
    TokenEvent,
)
from shared.contract.task import FAULTED

FrameId = tuple[int, int]
OPENING_K: Final = 8  # the opening's frames are `s.8`, `s.9`: after every frame event s itself makes
MODES: Final = frozenset({"values", "updates", "messages-tuple", "custom"})
DEFAULT_MODES: Final = ("values",)
_SILENT: Final = (StatusEvent, NodeStartEvent, NodeSkipEvent)  # the lifecycle LangGraph has no frame for


def parse_id(raw: str | None) -> FrameId | None:
    if raw in (None, ""):
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
    names the call, because one agent node may ask again for its next call."""
    value: dict[str, Any] = {"kind": "approval", "message": event.message, "node_id": event.node_id,
                             "run_id": run_id}
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
    trace: RunTrace = field(default_factory=RunTrace)

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
        return frames

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
        elif isinstance(event, NodeEndEvent):
            if "updates" in self.modes and event.status == "done" and event.node_id:
                if event.node_id == ANSWER_NODE:
                    answer = "".join(self.trace.tokens.get(ANSWER_NODE, [])) or (event.output_preview or "")
                    update: dict[str, Any] = {"messages": [messages.ai(messages.answer_id(self.run_id), answer,
                                                                       model=self.trace.model)]}
                else:
                    update = {"output": event.output_preview}
                out.append(("updates", {event.node_id: update}))
        elif isinstance(event, DoneEvent):
            if "values" in self.modes:
                out.append(("values", self.state()))
            out.append(self.ending())
        elif isinstance(event, ApprovalRequestEvent):
            pass  # pending or not is known only by looking further: see `interrupted`
        elif not isinstance(event, _SILENT) and "custom" in self.modes:
            out.append(("custom", {"type": event.type, **event.model_dump(mode="json", exclude_none=True,
                                                                          exclude={"type", "task_id"})}))
        return out

    def interrupted(self, event: ApprovalRequestEvent) -> list[tuple[str, Any]]:
        interrupt = interrupt_of(self.run_id, event)
        out: list[tuple[str, Any]] = []
        if "updates" in self.modes:
            out.append(("updates", {"__interrupt__": [interrupt]}))
        if "values" in self.modes:
            out.append(("values", self.state(interrupt)))
        out.append(("end", None))
        return out

    def ending(self) -> tuple[str, Any]:
        status = self.trace.status
        if status in FAULTED:
            return "error", {"error": self.trace.code or status,
                             "message": error_sentence(status, self.trace.code, self.trace.error)}
        return "end", None


def modes_of(stream_mode: str | Iterable[str] | None) -> frozenset[str]:
    """The asked modes Agentix streams (`messages-tuple`'s frames are named `messages`); others
    (`debug`, `events`, `tasks`, `checkpoints`, the legacy `messages`) send nothing."""
    asked = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode or ())
    return frozenset(m for m in asked if m in MODES) if any(asked) else frozenset(DEFAULT_MODES)


async def _pending(bus: Bus, run_id: str, request: ApprovalRequestEvent) -> bool:
    """Whether an approval still waits: nothing but the parking came after it."""
    done = await last_event(bus, run_id, "status")
    if isinstance(done, DoneEvent):
        return False
    later = await last_event(bus, run_id, "exec")
    return later is None or later.n <= request.n


async def frames(bus: Bus, stream: RunStream, after: FrameId | None, opening_at: int = 0,
                 settle: Callable[[], Awaitable[None]] | None = None) -> AsyncIterator[bytes]:
    """The encoded frames after `after`, following the run live until it ends or waits;
    `settle` runs before the last frame (so the run's record agrees with it when it arrives)."""

    def fresh(frame_id: FrameId) -> bool:
        return after is None or frame_id > after

    for k, (name, data) in enumerate(stream.opening(), start=OPENING_K):
        if fresh((opening_at, k)):
            yield encode((opening_at, k), name, data)
    async for _, event in read_events(bus, stream.run_id, follow=True):
        made = stream.frames(event)
        if isinstance(event, ApprovalRequestEvent) and event.n > opening_at and await _pending(bus, stream.run_id,
                                                                                               event):
            made = stream.interrupted(event)
        for k, (name, data) in enumerate(made):
            frame_id = (event.n, k)
            if name in ("end", "error"):
                if settle is not None:
                    await settle()
                yield encode(None, name, data)
                return
            if fresh(frame_id):
                yield encode(frame_id, name, data)


async def final_state(bus: Bus, stream: RunStream, opening_at: int = 0) -> dict[str, Any]:
    """The thread's values once the run has ended or waits for an approval (`__interrupt__`);
    a failed run's is `{"__error__": {error, message}}`, as the SDK's `wait` reads it. A resumed
    run (`opening_at`: its approval request) waits for what comes after that approval: the
    decision is just being sent, so the request it answers may still look pending."""
    async for _, event in read_events(bus, stream.run_id, follow=True):
        stream.frames(event)
        if isinstance(event, ApprovalRequestEvent) and event.n > opening_at and await _pending(bus, stream.run_id,
                                                                                               event):
            return stream.state(interrupt_of(stream.run_id, event))
    name, data = stream.ending()
    return {"__error__": data} if name == "error" else stream.state()
