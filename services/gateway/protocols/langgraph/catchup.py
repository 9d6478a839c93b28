"""A run's record brought up to its own stream. The recorder follows the events asynchronously,
so a client that has just read `end` (or an interrupt) could otherwise find the run still
running; what the recorder would do is done here first (idempotent: its own pass then changes
nothing). The API's task view does the same for tasks."""

from __future__ import annotations

from services.gateway.chat.progress import ChatProgress
from services.gateway.chat.states import RUN_TERMINAL
from services.gateway.chat.tables import ChatRun
from services.gateway.db import Database
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import DoneEvent, StatusEvent


async def settle(db: Database, bus: Bus | None, run_id: str | None) -> None:
    if run_id is None or bus is None or not bus.connected:
        return
    run = await db.run(lambda s: s.get(ChatRun, run_id))
    if run is None or run.state in RUN_TERMINAL:
        return
    latest = await last_event(bus, run_id, "status")
    if isinstance(latest, DoneEvent):
        await ChatProgress(bus, db).finish(run_id)
    elif isinstance(latest, StatusEvent) and latest.status == "waiting" and run.state != "awaiting_approval":
        await ChatProgress(bus, db)([latest])
