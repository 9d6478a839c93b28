"""Group commit: small writes handed in by concurrent callers share one transaction (the
gateway's request path — task rows, queued marks, audit rows — and the tools database's document
registrations and job states).

One writer task owns the queue. While it commits a group, new writes queue up; the next group
takes all of them (up to `max_group`) in one transaction. Each caller waits until the commit
that holds its write is done, so an answer never precedes durability. A write that fails fails
the group's transaction: the group is then written again one write per transaction, so every
caller gets its own outcome, exactly as if it had written alone (a write must therefore do
nothing but its statements — it may run twice, the first time rolled back).

A write nobody waits for (`run_later`) goes with the next group; its failure is logged.

The writer exists only while there is work; `drain` refuses new writes and waits for the
queued ones, for shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection

from shared.errors import AgentixError

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger("agentix.db.group_commit")
MAX_GROUP = 64  # writes per transaction at most: a group's commit stays short


class GroupCommitClosed(AgentixError):
    """The writer is draining for shutdown and takes no new writes."""

    code = "unavailable"
    http_status = 503
    retryable = True  # another replica (or this service restarted) takes it


@dataclass
class _Write:
    fn: Callable[[Connection], Any]
    done: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class GroupCommit:
    def __init__(self, tx: Callable[[], AbstractContextManager[Connection]], max_group: int = MAX_GROUP) -> None:
        self._tx = tx  # one write transaction, committed when the block ends
        self.max_group = max_group
        self._queue: list[_Write] = []
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self.groups = 0  # transactions committed (for tests and the bench)
        self.writes = 0

    async def run(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(conn, *args)` in a transaction shared with the writes queued meanwhile; returns
        (or raises) once that transaction is committed (or rolled back)."""
        write = self._queued(lambda conn: fn(conn, *args, **kwargs))
        # The write commits even if this caller is cancelled: shielded, like a thread it started.
        try:
            return await asyncio.shield(write.done)
        except asyncio.CancelledError:
            write.done.add_done_callback(_consume)  # its failure, if any, has nobody to tell
            raise

    def run_later(self, fn: Callable[Concatenate[Connection, P], Any], *args: P.args, **kwargs: P.kwargs) -> None:
        """`fn(conn, *args)` with the next group, nobody waiting for it; a failure is logged."""
        self._queued(lambda conn: fn(conn, *args, **kwargs)).done.add_done_callback(_log_failure)

    def _queued(self, fn: Callable[[Connection], Any]) -> _Write:
        if self._closed:
            raise GroupCommitClosed("the database writer is shutting down")
        write = _Write(fn)
        self._queue.append(write)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_all(), name="group commit")
        return write

    async def drain(self) -> None:
        """Take no new writes; return once every queued one is committed."""
        self._closed = True
        if self._writer is not None:
            await asyncio.shield(self._writer)

    async def _write_all(self) -> None:
        while self._queue:
            group, self._queue = self._queue[: self.max_group], self._queue[self.max_group :]
            try:
                outcomes = await asyncio.to_thread(self._commit, group)
            except BaseException as exc:  # e.g. cancelled: nobody may wait forever
                self._settle(group, [_Failed(exc)] * len(group))
                raise
            self._settle(group, outcomes)

    @staticmethod
    def _settle(group: list[_Write], outcomes: list[Any]) -> None:
        for write, outcome in zip(group, outcomes, strict=True):
            if write.done.done():
                continue
            if isinstance(outcome, _Failed):
                write.done.set_exception(outcome.exc)
            else:
                write.done.set_result(outcome)

    def _commit(self, group: list[_Write]) -> list[Any]:
        """In a worker thread: the group in one transaction; if that fails, each write alone."""
        try:
            with self._tx() as conn:
                results = [w.fn(conn) for w in group]
        except Exception as exc:
            if len(group) == 1:
                return [_Failed(exc)]
            log.debug("a group of %d writes failed (%s); writing them one by one", len(group), exc)
            return list(self._one_by_one(group))
        self.groups += 1
        self.writes += len(group)
        return results

    def _one_by_one(self, group: list[_Write]) -> Iterator[Any]:
        for w in group:
            try:
                with self._tx() as conn:
                    result = w.fn(conn)
            except Exception as exc:
                yield _Failed(exc)
                continue
            self.groups += 1
            self.writes += 1
            yield result


def _consume(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()


def _log_failure(done: asyncio.Future[Any]) -> None:
    if not done.cancelled() and done.exception() is not None:
        log.error("a write nobody waited for could not be committed: %s", done.exception())


@dataclass(frozen=True)
class _Failed:
    """A write's exception, told apart from a write that returns an exception object."""

    exc: BaseException
