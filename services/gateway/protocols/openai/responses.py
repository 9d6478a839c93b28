"""`POST /v1/responses`, OpenAI's Responses API: an assistant's answer, whole or streamed as the
typed events (`response.created`, `response.in_progress`, `response.output_item.added`,
`response.content_part.added`, `response.output_text.delta`, `response.output_text.done`,
`response.content_part.done`, `response.output_item.done`, `response.completed` with usage;
`response.reasoning_summary_text.delta` for thinking; a call of a client's function tool as a
`function_call` item with `response.function_call_arguments.delta`/`.done`; `response.failed`
for a run that failed), each with its `sequence_number`. It is a translator of the one run feed,
as chat completions are (`CompletionFrames`): the same `Translator` folds the run's events. The
request's side is `response_input`."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.protocols.openai.errors import error_body
from services.gateway.protocols.openai.response_input import ResponseRequest
from services.gateway.protocols.openai.stream import abandon
from services.gateway.protocols.openai.translate import Ending, Translator
from services.gateway.runs.frames import Entry
from services.gateway.runs.stream import run_frames
from shared.bus import Bus

log = logging.getLogger("agentix.gateway.openai")
_BROKE = "The gateway lost the run's event stream; the run may still be going."


def _sse(event: dict[str, Any]) -> bytes:
    return (f"event: {event['type']}\ndata: ".encode() + json.dumps(event, ensure_ascii=False,
                                                                      separators=(",", ":")).encode() + b"\n\n")


@dataclass
class ResponseFrames:
    """A run's events as the Responses API's typed events (`streamed`), or only folded (whole)."""

    translator: Translator
    model: str
    body: ResponseRequest
    streamed: bool = True
    starting_after: int = -1  # a resumed stream: the events up to this sequence number are not sent again
    created_at: int = field(default_factory=lambda: int(time.time()))
    _seq: int = 0
    _text_open: bool = False
    _reasoning: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"resp_{self.translator.started.run_id}"

    @property
    def message_id(self) -> str:
        return f"msg_{self.translator.started.run_id}"

    @property
    def after_seq(self) -> int:
        return 0

    @property
    def finished(self) -> bool:
        return self.translator.ending is not None

    def _event(self, kind: str, **fields: Any) -> bytes:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return _sse(event) if self.streamed and event["sequence_number"] > self.starting_after else b""

    @property
    def _base(self) -> int:
        """The output index of the first item after the reasoning (when the model thought)."""
        return 1 if self.translator.reasoning else 0

    def _call_index(self, index: int) -> int:
        return self._base + (1 if self._text_open else 0) + index

    def response(self, status: str, ending: Ending | None = None) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if self.translator.reasoning:
            output.append({"type": "reasoning", "id": f"rs_{self.translator.started.run_id}",
                           "summary": [{"type": "summary_text", "text": "".join(self.translator.reasoning)}]})
        if status != "in_progress" and ending is not None and ending.error is None:
            if self.translator.text or not self.translator.tool_calls:
                output.append(self._message("completed"))
            output.extend(_function_call(call, "completed") for call in self.translator.tool_calls)
        usage = ending.usage if ending else None
        prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        body = self.body
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "model": self.model, "output": output, "instructions": body.instructions, "background": body.background,
                "conversation": {"id": body.conversation_id} if body.conversation_id else None,
                "metadata": body.metadata or {}, "max_output_tokens": body.max_output_tokens,
                "parallel_tool_calls": body.parallel_tool_calls is not False,
                "tool_choice": body.tool_choice or "auto", "tools": body.tools or [], "store": True,
                "previous_response_id": body.previous_response_id, "temperature": body.temperature,
                "top_p": body.top_p, "user": body.user, "safety_identifier": body.safety_identifier,
                "reasoning": {"effort": body.effort, "summary": None}, "service_tier": "default",
                "truncation": "disabled", "text": {"format": (body.text or {}).get("format") or {"type": "text"},
                                                   "verbosity": (body.text or {}).get("verbosity") or "medium"},
                "error": ending.error["error"] if ending and ending.error else None,
                "incomplete_details": ({"reason": "max_output_tokens"}
                                       if ending and ending.finish_reason == "length" else None),
                "usage": {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}} if ending is not None else None}

    def _message(self, status: str, text: str | None = None) -> dict[str, Any]:
        content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
        if text is None and status == "completed":
            content = [{"type": "output_text", "text": self.translator.text, "annotations": []}]
        return {"type": "message", "id": self.message_id, "status": status, "role": "assistant", "content": content}

    def opening(self) -> bytes:
        started = self.response("in_progress")
        return (self._event("response.created", response=started)
                + self._event("response.in_progress", response=started))

    def _open_text(self) -> bytes:
        if self._text_open:
            return b""
        self._text_open = True
        return (self._event("response.output_item.added", output_index=self._base,
                            item=self._message("in_progress", text=None))
                + self._event("response.content_part.added", item_id=self.message_id, output_index=self._base,
                              content_index=0, part={"type": "output_text", "text": "", "annotations": []}))

    def _close_text(self) -> bytes:
        """The message's closing events (its text is all there: tail included)."""
        ending = self.translator.ending
        out = []
        if ending is not None and ending.tail:
            out.append(self._event("response.output_text.delta", item_id=self.message_id, output_index=self._base,
                                   content_index=0, delta=ending.tail, logprobs=[]))
        text = self.translator.text
        out.append(self._event("response.output_text.done", item_id=self.message_id, output_index=self._base,
                               content_index=0, text=text, logprobs=[]))
        out.append(self._event("response.content_part.done", item_id=self.message_id, output_index=self._base,
                               content_index=0, part={"type": "output_text", "text": text, "annotations": []}))
        out.append(self._event("response.output_item.done", output_index=self._base,
                               item=self._message("completed")))
        return b"".join(out)

    def _call_events(self, call: dict[str, Any], index: int) -> bytes:
        """A client tool call, whole: its item, its arguments (in one piece) and its end."""
        item_id, at = f"fc_{call['id']}", self._call_index(index)
        arguments = call["function"]["arguments"]
        return (self._event("response.output_item.added", output_index=at, item=_function_call(call, "in_progress",
                                                                                                arguments=""))
                + self._event("response.function_call_arguments.delta", item_id=item_id, output_index=at,
                              delta=arguments)
                + self._event("response.function_call_arguments.done", item_id=item_id, output_index=at,
                              name=call["function"]["name"], arguments=arguments)
                + self._event("response.output_item.done", output_index=at, item=_function_call(call, "completed")))

    def frames(self, entry: Entry) -> bytes:
        delta = self.translator.feed(entry.event)
        if delta is None:
            return b""
        if delta.reasoning is not None:
            return self._event("response.reasoning_summary_text.delta", item_id=f"rs_{self.translator.started.run_id}",
                               output_index=0, summary_index=0, delta=delta.reasoning)
        if delta.tool_call is not None:
            return b""  # said whole at the end, after the message's text (the output's order)
        return self._open_text() + self._event("response.output_text.delta", item_id=self.message_id,
                                               output_index=self._base, content_index=0,
                                               delta=delta.content or "", logprobs=[])

    def caught_up(self) -> bytes:
        return b""

    def closing(self) -> bytes:
        ending = self.translator.ending
        if ending is None or not self.streamed:
            return b""
        if ending.error is not None:
            return self._event("response.failed", response=self.response("failed", ending))
        calls = self.translator.tool_calls
        out = [] if calls and not self._text_open and not ending.tail else [self._open_text(), self._close_text()]
        out.extend(self._call_events(call, index) for index, call in enumerate(calls))
        status = "incomplete" if ending.finish_reason == "length" else "completed"
        out.append(self._event(f"response.{status}", response=self.response(status, ending)))
        return b"".join(out)


def _function_call(call: dict[str, Any], status: str, arguments: str | None = None) -> dict[str, Any]:
    """A client tool call as the Responses API's `function_call` output item."""
    function = call["function"]
    return {"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"], "name": function["name"],
            "arguments": function["arguments"] if arguments is None else arguments, "status": status}


async def streamed(state: Any, db: Database, bus: Bus, user: Principal, frames: ResponseFrames,
                   live: bool = True, owner: bool = True) -> Any:
    """The typed events of the run, live from its first (`state`: the app's). A run whose client
    went away before it ended is cancelled, as a streamed chat completion's (`owner`: the
    request that made it; a reader of it again leaves it be)."""
    run_id = frames.translator.started.run_id
    try:
        async for body in run_frames(state, bus, run_id, frames, live=live):
            yield body
    except Exception as exc:
        log.warning("following run %s for a Responses stream failed: %s", run_id, exc)
        if frames.translator.ending is None:
            frames.translator.ending = Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
            yield frames.closing()
    finally:
        if owner and frames.translator.ending is None:
            await abandon(db, bus, user, run_id)


async def whole(state: Any, bus: Any, frames: ResponseFrames, live: bool = True) -> dict[str, Any]:
    """The response object once the run has ended; a run that failed is `status: failed`."""
    try:
        async for _ in run_frames(state, bus, frames.translator.started.run_id, frames, live=live):
            pass
    except Exception as exc:
        log.warning("following run %s for a response failed: %s", frames.translator.started.run_id, exc)
    if frames.translator.ending is None:
        frames.translator.ending = Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
    return _ended(frames)


def _ended(frames: ResponseFrames) -> dict[str, Any]:
    """The response object of a run that has ended (`failed`/`cancelled` with its error)."""
    ending = frames.translator.ending
    assert ending is not None
    if ending.error is not None:
        return frames.response("cancelled" if ending.error["error"]["code"] == "cancelled" else "failed", ending)
    return frames.response("incomplete" if ending.finish_reason == "length" else "completed", ending)


async def now(state: Any, bus: Any, frames: ResponseFrames) -> dict[str, Any]:
    """The response as it stands (`GET /v1/responses/{id}`, never waiting): what its run's log
    holds so far, `in_progress` until the run has ended, then as `whole` gives it."""
    try:
        async for _ in run_frames(state, bus, frames.translator.started.run_id, frames, live=False):
            pass
    except Exception as exc:
        log.warning("reading run %s for a response failed: %s", frames.translator.started.run_id, exc)
        frames.translator.ending = Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
    return frames.response("in_progress") if frames.translator.ending is None else _ended(frames)
