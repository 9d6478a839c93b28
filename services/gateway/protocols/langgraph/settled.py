"""`/lg` answers no sooner than the records agree with the run's log.

The conversation queue follows a run's events asynchronously, so a client that has just read
`end` (or an interrupt) could otherwise find the run still running, or the thread without its
answer. Readers do not write the records: they wait for the queue's commit
(`runs.recorded.RecordWatch`), which it announces."""

from __future__ import annotations

from sqlmodel import Session

from services.gateway.chat.states import RUN_TERMINAL
from services.gateway.chat.tables import ChatRun
from services.gateway.db import Database
from services.gateway.runs.recorded import RecordWatch
from shared.bus import Bus
from shared.bus.events import last_event
from shared.contract.events import DoneEvent, StatusEvent


async def settled(db: Database, bus: Bus | None, watch: RecordWatch | None, run_id: str | None) -> None:
    """Until the run's record says what the latest status in its log says: ended after its
    `done`, waiting for an approval after its parking (at most `recorded.WAIT_S`)."""
    if run_id is None or bus is None or watch is None or not bus.connected:
        return
    latest = await last_event(bus, run_id, "status")
    if isinstance(latest, DoneEvent):
        wanted = RUN_TERMINAL
    elif isinstance(latest, StatusEvent) and latest.status == "waiting":
        wanted = RUN_TERMINAL | {"awaiting_approval"}
    else:
        return

    async def agrees() -> bool:
        state = await db.run(_state, run_id)
        return state is None or state in wanted

    await watch.until(run_id, agrees)


def _state(session: Session, run_id: str) -> str | None:
    run = session.get(ChatRun, run_id)
    return run.state if run is not None else None  # a deleted conversation's run: nothing to wait for
