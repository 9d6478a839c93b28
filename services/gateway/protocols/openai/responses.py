"""`POST /v1/responses`, the first part of OpenAI's Responses API: a stateless text answer of an
assistant, whole or streamed as the typed events (`response.created`, `response.in_progress`,
`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`,
`response.output_text.done`, `response.content_part.done`, `response.output_item.done`,
`response.completed` with usage; `response.reasoning_summary_text.delta` for thinking;
`response.failed` for a run that failed), each with its `sequence_number`. It is a translator of
the one run feed, as chat completions are (`CompletionFrames`): the same `Translator` folds the
run's events. What it does not do yet is a 400 naming the parameter (see docs/API.md)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.errors import error_body
from services.gateway.protocols.openai.request import Prompt
from services.gateway.protocols.openai.stream import abandon
from services.gateway.protocols.openai.translate import Ending, Translator
from services.gateway.runs.frames import Entry
from services.gateway.runs.stream import run_frames
from shared.bus import Bus

log = logging.getLogger("agentix.gateway.openai")
_BROKE = "The gateway lost the run's event stream; the run may still be going."

# Parameters that change nothing when left at these values; anything else is refused by name.
_NOT_YET: dict[str, tuple[Any, ...]] = {
    "tools": (None, []), "tool_choice": (None, "auto", "none"), "previous_response_id": (None,),
    "conversation": (None,), "background": (None, False), "include": (None, []), "prompt": (None,),
    "text": (None,), "reasoning": (None,), "parallel_tool_calls": (None, True, False), "top_logprobs": (None, 0),
}
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


class ResponseRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    stream: bool = False
    store: bool | None = None
    metadata: dict[str, str] | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)


def _refuse(param: str, why: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", f"`{param}` is not supported: {why}",
                      errors=[{"code": "unsupported_parameter", "message": why, "field": param}])


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content if isinstance(content, list) else []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text"):
            raise _refuse(f"{where}.content[{index}]", f"`{kind}` content does not reach the model: text only.")
        texts.append(str(part.get("text") or ""))
    return "".join(texts)


def prompt_of(body: ResponseRequest) -> Prompt:
    """The run's input: the last user message, the items before it as history, `instructions`
    first as a system message. Only message items for now."""
    extra = body.model_extra or {}
    for param, fine in _NOT_YET.items():
        value = extra.get(param)
        if value not in fine:
            raise _refuse(param, "the Responses API here answers stateless text requests for now.")
    items = [{"role": "user", "content": body.input}] if isinstance(body.input, str) else body.input
    turns: list[dict[str, str]] = []
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if item.get("type", "message") != "message" or item.get("role") not in _ROLES:
            raise _refuse(f"{where}.type", f"`{item.get('type')}` items are not supported yet: messages only.")
        turns.append({"role": _ROLES[item["role"]], "content": _text_of(item.get("content"), where)})
    if not turns or turns[-1]["role"] != "user" or not turns[-1]["content"].strip():
        raise ApiProblem(400, "Bad Request", "The last input item must be the user's message, with text.",
                         errors=[{"code": "invalid_value", "message": "last item", "field": "input"}])
    history = ([{"role": "system", "content": body.instructions}] if body.instructions else []) + turns[:-1]
    return Prompt(text=turns[-1]["content"], history=history)


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

    def response(self, status: str, ending: Ending | None = None) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if self.translator.reasoning:
            output.append({"type": "reasoning", "id": f"rs_{self.translator.started.run_id}",
                           "summary": [{"type": "summary_text", "text": "".join(self.translator.reasoning)}]})
        if status != "in_progress" and ending is not None and ending.error is None:
            output.append(self._message("completed"))
        usage = ending.usage if ending else None
        prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "model": self.model, "output": output, "instructions": self.body.instructions,
                "metadata": self.body.metadata or {}, "max_output_tokens": self.body.max_output_tokens,
                "parallel_tool_calls": False, "tool_choice": "auto", "tools": [], "store": False,
                "previous_response_id": None, "temperature": None, "top_p": None, "truncation": "disabled",
                "text": {"format": {"type": "text"}},
                "error": ending.error["error"] if ending and ending.error else None,
                "incomplete_details": ({"reason": "max_output_tokens"}
                                       if ending and ending.finish_reason == "length" else None),
                "usage": {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}} if status != "in_progress" else None}

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
        index = 1 if self.translator.reasoning else 0
        return (self._event("response.output_item.added", output_index=index,
                            item=self._message("in_progress", text=None))
                + self._event("response.content_part.added", item_id=self.message_id, output_index=index,
                              content_index=0, part={"type": "output_text", "text": "", "annotations": []}))

    def frames(self, entry: Entry) -> bytes:
        delta = self.translator.feed(entry.event)
        if delta is None:
            return b""
        if delta.reasoning is not None:
            return self._event("response.reasoning_summary_text.delta", item_id=f"rs_{self.translator.started.run_id}",
                               output_index=0, summary_index=0, delta=delta.reasoning)
        return self._open_text() + self._event("response.output_text.delta", item_id=self.message_id,
                                               output_index=1 if self.translator.reasoning else 0,
                                               content_index=0, delta=delta.content or "", logprobs=[])

    def caught_up(self) -> bytes:
        return b""

    def closing(self) -> bytes:
        ending = self.translator.ending
        if ending is None or not self.streamed:
            return b""
        if ending.error is not None:
            return self._event("response.failed", response=self.response("failed", ending))
        out = [self._open_text()]
        index = 1 if self.translator.reasoning else 0
        if ending.tail:
            out.append(self._event("response.output_text.delta", item_id=self.message_id, output_index=index,
                                   content_index=0, delta=ending.tail, logprobs=[]))
        text = self.translator.text
        out.append(self._event("response.output_text.done", item_id=self.message_id, output_index=index,
                               content_index=0, text=text, logprobs=[]))
        out.append(self._event("response.content_part.done", item_id=self.message_id, output_index=index,
                               content_index=0, part={"type": "output_text", "text": text, "annotations": []}))
        out.append(self._event("response.output_item.done", output_index=index, item=self._message("completed")))
        status = "incomplete" if ending.finish_reason == "length" else "completed"
        out.append(self._event(f"response.{status}", response=self.response(status, ending)))
        return b"".join(out)


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
    ending = frames.translator.ending or Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
    if ending.error is not None:
        return frames.response("cancelled" if ending.error["error"]["code"] == "cancelled" else "failed", ending)
    return frames.response("incomplete" if ending.finish_reason == "length" else "completed", ending)
