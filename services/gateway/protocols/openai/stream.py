"""Following a run to its answer: as an OpenAI event stream, or whole — the `/v1` translator of
the run feed (`CompletionFrames`).

The run's events are read from its start (a chat run that waits its turn simply has none yet).
The stream starts with the assistant's role at once, then one chunk per token or thinking piece,
then the finish (and the usage chunk when asked), then `data: [DONE]`; a failure after the stream
began is a `data: {"error": …}` line, which the `openai` SDK raises. A `: ping` comment keeps a
quiet stream open (the SDK skips comments).

A streamed stateless run whose client went away before its answer ended is cancelled: nobody else can
read it. A conversation's run goes on: its answer lands in the conversation."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, Final

import anyio

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.errors import error_body
from services.gateway.protocols.openai.translate import Ending, Translator
from services.gateway.protocols.openai.wire import DONE, Head, sse
from services.gateway.runs import submit as tasks
from services.gateway.runs.frames import Entry
from services.gateway.runs.stream import run_frames
from shared.bus import Bus

log = logging.getLogger("agentix.gateway.openai")
PING_S: Final = 10.0
_BROKE: Final = "The gateway lost the run's event stream; the run may still be going."


class CompletionFrames:
    """A run's events as chat completion chunks (`streamed`), or only folded into the
    translator (a whole completion: `whole`)."""

    def __init__(self, head: Head, translator: Translator, include_usage: bool = False, streamed: bool = True) -> None:
        self.head = head
        self.translator = translator
        self.include_usage = include_usage
        self.streamed = streamed

    @property
    def after_seq(self) -> int:
        return 0

    @property
    def finished(self) -> bool:
        return self.translator.ending is not None

    def opening(self) -> bytes:
        return sse(self.head.chunk({"role": "assistant", "content": ""})) if self.streamed else b""

    def frames(self, entry: Entry) -> bytes:
        delta = self.translator.feed(entry.event)
        return self.head.delta(delta) if delta is not None and self.streamed else b""

    def caught_up(self) -> bytes:
        return b""  # a run parked on an approval ends the answer with its own event (`waiting`)

    def closing(self) -> bytes:
        ending = self.translator.ending
        if ending is None or not self.streamed:
            return b""
        if ending.error is not None:
            return sse(ending.error) + DONE
        out = [sse(self.head.chunk({"content": ending.tail}))] if ending.tail else []
        out.append(sse(self.head.chunk({}, ending.finish_reason)))
        if self.include_usage:
            out.append(sse(self.head.usage_chunk(ending.usage)))
        return b"".join(out) + DONE


async def abandon(db: Database, bus: Bus, user: Principal, run_id: str) -> None:
    """Cancel a stateless run nobody can read any more (its streaming client went away)."""
    with anyio.CancelScope(shield=True), contextlib.suppress(ApiProblem):  # 409: it ended meanwhile
        try:
            await tasks.cancel(db, bus, user, run_id)
            log.info("stateless run %s cancelled: its client went away", run_id)
        except Exception as exc:
            log.warning("stateless run %s was left running: %s", run_id, exc)


async def event_stream(state: Any, db: Database, bus: Bus, user: Principal, head: Head, translator: Translator,
                       include_usage: bool) -> AsyncIterator[bytes]:
    """The streamed completion (`state`: the app's)."""
    run_id = translator.started.run_id
    frames = CompletionFrames(head, translator, include_usage)
    try:
        async for body in run_frames(state, bus, run_id, frames, live=True):
            yield body
    except Exception as exc:
        log.warning("following run %s for an OpenAI stream failed: %s", run_id, exc)
        if translator.ending is None:
            translator.ending = Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
            yield frames.closing()
    finally:
        if translator.ending is None and translator.started.conversation_id is None:
            await abandon(db, bus, user, run_id)


async def whole(state: Any, bus: Bus, head: Head, translator: Translator) -> dict[str, Any]:
    """The completion once the run has ended (or waits for an approval); a failure raises."""
    folded = CompletionFrames(head, translator, streamed=False)
    try:
        async for _ in run_frames(state, bus, translator.started.run_id, folded, live=True):
            pass
    except Exception as exc:
        log.warning("following run %s for an OpenAI completion failed: %s", translator.started.run_id, exc)
    ending = translator.ending or Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
    if ending.error is not None:
        error = ending.error["error"]
        raise ApiProblem(ending.status, "Run failed", error["message"], type_=error["code"] or "run_failed")
    return head.completion(translator, ending)
