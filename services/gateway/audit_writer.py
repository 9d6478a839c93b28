"""Group commit for the rows the request path writes (audit log, guardrail events).

Every mutating request writes its audit row before its response leaves. Committing each row in
its own transaction on a worker thread costs a thread round trip, a session and a commit per
request; under concurrent load those queue behind one another. Here a request hands its row to
the writer and waits for it to be durable, and the writer commits whatever has queued meanwhile
in one transaction: one commit for N concurrent requests, and still no response before its row.

A failed batch is retried row by row, so one bad row never costs its neighbours theirs: each
request learns the outcome of its own row only.

A row is its table's column values, not a model instance: building a SQLModel table object sets
each attribute through pydantic and SQLAlchemy's instrumentation (about 140 µs for an audit row,
on the event loop, for every mutating request), and the INSERT only needs the values."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, insert
from sqlmodel import Session

from services.gateway.db import Database

log = logging.getLogger("agentix.gateway.audit")

MAX_BATCH = 500  # rows per transaction: bounds one commit's time when a burst queues
Row = tuple[Table, dict[str, Any]]  # a table and one row's column values (its defaults not applied)


def _insert_rows(session: Session, rows: Sequence[Row]) -> None:
    """One multi-row INSERT per table, on the table itself: neither the unit of work nor the ORM's
    bulk insert (an INSERT of the model class), whose per-statement setup cost a third more CPU
    per one-row transaction on SQLite, 0.71-0.86 -> 0.56-0.59 ms. The ids are not needed back."""
    by_table: dict[Table, list[dict[str, Any]]] = {}
    for table, values in rows:
        by_table.setdefault(table, []).append(values)
    for table, batch in by_table.items():
        session.execute(insert(table), batch)


class RowWriter:
    """Writes rows in batches; `write` returns once its row is committed (or raises its error)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._queue: list[tuple[Row, asyncio.Future[None] | None]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def write(self, table: Table, values: dict[str, Any]) -> None:
        row = (table, values)
        done = asyncio.get_running_loop().create_future()
        self._queue.append((row, done))
        self._wake()
        # A cancelled request does not take its row back: the writer still commits it.
        await asyncio.shield(done)

    def write_later(self, table: Table, values: dict[str, Any]) -> None:
        """Queue a row nobody waits for (a failure to commit it is logged)."""
        self._queue.append(((table, values), None))
        self._wake()

    async def close(self) -> None:
        """Commit what is queued (rows written later included)."""
        if self._flusher is not None:
            await self._flusher

    def _wake(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="gateway-row-writer")

    async def _flush(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                await self.db.run(_insert_rows, [row for row, _ in batch])
            except Exception as exc:
                if len(batch) == 1:
                    _settle(batch[0][1], exc)
                else:
                    await self._one_by_one(batch)
                continue
            for _, done in batch:
                _settle(done, None)

    async def _one_by_one(self, batch: list[tuple[Row, asyncio.Future[None] | None]]) -> None:
        for row, done in batch:
            try:
                await self.db.run(_insert_rows, [row])
            except Exception as exc:
                _settle(done, exc)
            else:
                _settle(done, None)


def _settle(done: asyncio.Future[None] | None, error: BaseException | None) -> None:
    if done is None:
        if error is not None:
            log.error("a row written later could not be committed: %s", error)
        return
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
