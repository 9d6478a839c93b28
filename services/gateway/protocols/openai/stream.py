"""Following a run to its answer: as an OpenAI event stream, or whole.

The run's events are read from the events stream from its start (a chat run that waits its
turn simply has none yet). The stream starts with the assistant's role at once, then one chunk
per token or thinking piece, then the finish (and the usage chunk when asked), then
`data: [DONE]`; a failure after the stream began is a `data: {"error": …}` line, which the
`openai` SDK raises. A `: ping` comment keeps a quiet stream open (the SDK skips comments).

A streamed stateless run whose client went away before its answer ended is cancelled: nobody else can
read it. A conversation's run goes on: its answer lands in the conversation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Final

import anyio

from services.gateway.db import Database
from services.gateway.principal import Principal
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.errors import error_body
from services.gateway.protocols.openai.translate import Ending, Translator
from services.gateway.protocols.openai.wire import DONE, PING, Head, sse
from services.gateway.runs import submit as tasks
from shared.aio import cancel_and_wait
from shared.bus import Bus
from shared.bus.events import read_events
from shared.contract.events import AnyEvent

log = logging.getLogger("agentix.gateway.openai")
PING_S: Final = 10.0
BATCH: Final = 256  # events written at most in one go
_BROKE: Final = "The gateway lost the run's event stream; the run may still be going."


async def follow(bus: Bus, run_id: str, ping_s: float = PING_S) -> AsyncGenerator[list[AnyEvent] | None, None]:
    """The run's events in order, in batches of what has arrived (a backlog or a burst of tokens
    goes out in one write, as the native SSE stream does); None after each `ping_s` without one."""
    queue: asyncio.Queue[AnyEvent | BaseException | None] = asyncio.Queue(maxsize=BATCH * 4)

    async def pump() -> None:
        try:
            async for _, event in read_events(bus, run_id):
                await queue.put(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await queue.put(exc)
            return
        await queue.put(None)

    reader = asyncio.create_task(pump(), name=f"openai-{run_id}")
    try:
        while True:
            try:
                async with asyncio.timeout(ping_s):
                    items = [await queue.get()]
            except TimeoutError:
                yield None
                continue
            last = items[-1]
            while last is not None and not isinstance(last, BaseException) and len(items) < BATCH \
                    and not queue.empty():
                last = queue.get_nowait()
                items.append(last)
            events = [i for i in items if i is not None and not isinstance(i, BaseException)]
            if events:
                yield events
            if isinstance(last, BaseException):
                raise last
            if last is None:
                return
    finally:
        with anyio.CancelScope(shield=True):  # a gone client's scope is cancelled: still stop the reader
            await cancel_and_wait(reader)


async def _abandon(db: Database, bus: Bus, user: Principal, run_id: str) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(ApiProblem):  # 409: it ended meanwhile
        try:
            await tasks.cancel(db, bus, user, run_id)
            log.info("stateless run %s cancelled: its client went away", run_id)
        except Exception as exc:
            log.warning("stateless run %s was left running: %s", run_id, exc)


async def event_stream(db: Database, bus: Bus, user: Principal, head: Head, translator: Translator,
                       include_usage: bool) -> AsyncIterator[bytes]:
    run_id = translator.started.run_id
    yield sse(head.chunk({"role": "assistant", "content": ""}))
    try:
        # Closed here, not whenever the garbage collector gets to it: its reader task stops at once.
        async with contextlib.aclosing(follow(bus, run_id)) as events:
            async for batch in events:
                if batch is None:
                    yield PING
                    continue
                frames = []
                for event in batch:
                    delta = translator.feed(event)
                    if delta is not None:
                        frames.append(head.delta(delta))
                    if translator.ending is not None:
                        break
                if frames:
                    yield b"".join(frames)
                if translator.ending is not None:
                    break
    except Exception as exc:
        log.warning("following run %s for an OpenAI stream failed: %s", run_id, exc)
        translator.ending = Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
    finally:
        if translator.ending is None and translator.started.conversation_id is None:
            await _abandon(db, bus, user, run_id)
    ending = translator.ending
    if ending is None:
        return
    if ending.error is not None:
        yield sse(ending.error)
    else:
        if ending.tail:
            yield sse(head.chunk({"content": ending.tail}))
        yield sse(head.chunk({}, ending.finish_reason))
        if include_usage:
            yield sse(head.usage_chunk(ending.usage))
    yield DONE


async def whole(bus: Bus, head: Head, translator: Translator) -> dict[str, Any]:
    """The completion once the run has ended (or waits for an approval); a failure raises."""
    try:
        async with contextlib.aclosing(follow(bus, translator.started.run_id)) as events:
            async for batch in events:
                for event in batch or ():
                    translator.feed(event)
                    if translator.ending is not None:
                        break
                if translator.ending is not None:
                    break
    except Exception as exc:
        log.warning("following run %s for an OpenAI completion failed: %s", translator.started.run_id, exc)
    ending = translator.ending or Ending(error=error_body(_BROKE, 502, "events_lost"), status=502)
    if ending.error is not None:
        error = ending.error["error"]
        raise ApiProblem(ending.status, "Run failed", error["message"], type_=error["code"] or "run_failed")
    return head.completion(translator, ending)
