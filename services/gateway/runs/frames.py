"""The SSE frames of a task's events and their batched writing: shared by the per-client reads
of `sse.py` and the gateway's shared feeds of live tasks (`task_feeds.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable

import anyio

from shared.aio import cancel_and_wait
from shared.contract.events import AnyEvent

# Frames are written in batches of up to BATCH, gathered for at most FLUSH_S after the first:
# a replay backlog costs a few large writes instead of one per event; live tokens wait ≤ 2 ms.
BATCH = 256
FLUSH_S = 0.002

# An event the gateway adds to a stream after one of the log's (e.g. a chat run's `error`
# sentence after its failed `status`): it is not in the log, so its frame has no `id`, and a
# client that resumes after the log's event gets it again.
Added = Callable[[AnyEvent], AnyEvent | None]


def frame(seq: int | None, event: AnyEvent) -> bytes:
    # `sse_data()` is one line of JSON: no newline can break the frame.
    numbered = f"id: {seq}\n" if seq is not None else ""
    return f"{numbered}event: {event.type}\ndata: {event.sse_data()}\n\n".encode()


async def batched(frames: AsyncIterator[bytes], name: str) -> AsyncGenerator[bytes, None]:
    """`frames` read ahead by a task of their own and written in small batches (see BATCH / FLUSH_S)."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=BATCH * 4)

    async def pump() -> None:
        try:
            async for item in frames:
                await queue.put(item)
        except asyncio.CancelledError:
            raise  # the response is gone: nobody reads an end marker, and a full queue would block it
        except Exception:
            await queue.put(None)  # the end marker: the writer then re-raises this error
            raise
        await queue.put(None)

    loop = asyncio.get_running_loop()
    reader = asyncio.create_task(pump(), name=name)
    try:
        while True:
            chunk = [await queue.get()]
            deadline = loop.time() + FLUSH_S
            while chunk[-1] is not None and len(chunk) < BATCH:
                if not queue.empty():
                    chunk.append(queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(remaining):
                        chunk.append(await queue.get())
                except TimeoutError:
                    break
            ended = chunk[-1] is None
            body = b"".join(c for c in chunk if c is not None)
            if body:
                yield body
            if ended:
                reader.result()  # re-raise a reader failure instead of ending silently
                return
    finally:
        # sse-starlette closes a gone client's stream by cancelling an anyio scope, which would
        # cancel every await here too: shield the wait so the reader is really gone.
        with anyio.CancelScope(shield=True):
            await cancel_and_wait(reader)
