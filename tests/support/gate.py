"""A TCP gate in front of a NATS node's client port: it accepts connections at once but passes
nothing through until it is opened, then joins each to the node. Services pointed at gates
reach the cluster the instant the test opens them (when the nodes answer JetStream-enabled),
not seconds later as their interpreters finish starting."""

from __future__ import annotations

import asyncio

from shared.natsd import free_port


class Gate:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.opened = asyncio.Event()
        self.held = 0  # connections accepted and waiting for the gate to open
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._ends: set[asyncio.StreamWriter] = set()  # both ends of every connection, to close

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> Gate:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", self.port)
        return self

    def open(self) -> None:
        self.opened.set()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        self._ends.add(writer)
        self.held += 1
        try:
            opened = asyncio.ensure_future(self.opened.wait())
            gone = asyncio.ensure_future(reader.read(1))  # a client that gives up closes its end
            await asyncio.wait({opened, gone}, return_when=asyncio.FIRST_COMPLETED)
            self.held -= 1
            opened.cancel()
            early = gone.result() if gone.done() else None
            gone.cancel()
            if not self.opened.is_set() or early == b"":
                return
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            self._ends.add(up_writer)
            if early:
                up_writer.write(early)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except OSError:
            pass  # the node is down: the client sees its connection close, and tries again
        finally:
            self._pipes.discard(task)
            writer.close()

    async def close(self) -> None:
        """Stop accepting and close every connection (each pipe then ends by itself)."""
        if self._server is not None:
            self._server.close()
        for end in self._ends:
            end.close()
        if self._pipes:
            await asyncio.wait(list(self._pipes), timeout=5)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
