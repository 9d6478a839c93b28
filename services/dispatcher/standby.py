"""A redelivered task whose run may still be alive elsewhere.

A lease can lapse while its dispatcher lives: a leader election of the tasks stream's consumer
outlasts the ack wait, or the dispatcher's link to NATS is cut for a while, and JetStream delivers
the message again. Running it a second time would ask the model again for the node in progress,
so the new holder first asks `tasks.running.<id>`: each run subscribes to its own task's subject
and answers there, so a task nobody runs has no responders at all.

Silence is weak evidence in a cluster that is electing leaders or re-routing after a node came
back: a request can go unanswered for seconds while its run is alive. So:
- "no responders" on the first ask (nobody ever said it runs the task) is the usual case of a
  dead dispatcher's task: taken over at once;
- on any silence after that, the message itself is read: gone means that run ended and acked it
  ("answered"); a read that cannot tell (an election) is retried, never guessed;
- still queued, the run is taken for dead ("died") only after a whole lease (the ack wait: what
  JetStream itself allows a silent holder) without an answer — or at once when it was this
  dispatcher's own run and has ended here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Literal

from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.js.errors import NotFoundError

from shared.bus import Bus
from shared.bus.delivery import Delivery
from shared.bus.retry import with_retries

log = logging.getLogger("agentix.dispatcher.standby")
RUNNING_ASK_S = 2.0  # how long one ask waits for "still running" (a loaded dispatcher may be slow)
POLL_MAX_S = 1.0  # asks at least this often: a run that has ended is noticed soon, whatever the lease

OtherRun = Literal["none", "died", "answered"]
Answer = Literal["here", "elsewhere", "nobody", "unknown"]


class StandBy:
    """Answers `tasks.running.<id>` for the runs of this dispatcher, and makes a redelivered task
    wait while its earlier run lives (the work queue keeps renewing the new delivery's lease)."""

    def __init__(self, bus: Bus, runs_here: Callable[[str], bool], lease_s: float,
                 ask_s: float = RUNNING_ASK_S) -> None:
        self.bus = bus
        self.runs_here = runs_here
        self.lease_s = lease_s
        self.ask_s = ask_s

    async def on_query(self, msg: Msg) -> None:
        if msg.reply and self.runs_here(msg.subject.rsplit(".", 1)[-1]):
            with contextlib.suppress(Exception):
                await msg.respond(b"running")

    async def other_run(self, task_id: str, delivery: Delivery) -> OtherRun:
        """"none": no other run; "answered": the run waited for ended and acked the message;
        "died": that run is gone with the message still queued (its dispatcher died)."""
        every_s = min(POLL_MAX_S, max(0.2, self.lease_s / 3))
        answered_by: Answer | None = None  # who last said the task runs
        silent_since: float | None = None
        while True:
            answer = await self._ask(task_id)
            if answer in ("here", "elsewhere"):
                if answered_by is None:
                    log.info("task %s was redelivered while it still runs (%s); standing by", task_id, answer)
                answered_by, silent_since = answer, None
            elif answer == "nobody" and answered_by is None and silent_since is None:
                return "none"
            else:
                if not await self._still_queued(delivery):
                    return "answered"
                if answer == "nobody" and answered_by == "here":
                    return "died"  # the run on this dispatcher ended without answering the message
                now = time.monotonic()
                silent_since = silent_since if silent_since is not None else now
                if now - silent_since >= self.lease_s:
                    log.info("task %s: no dispatcher said it runs it for %.1f s (last: %s)",
                             task_id, now - silent_since, answer)
                    return "died"
            await asyncio.sleep(every_s)

    async def _ask(self, task_id: str) -> Answer:
        if self.runs_here(task_id):
            return "here"
        try:
            await self.bus.nc.request(self.bus.subjects.running(task_id), b"", timeout=self.ask_s)
        except NoRespondersError:
            return "nobody"
        except Exception:  # no answer in time, or the link is down: cannot tell
            return "unknown"
        return "elsewhere"

    async def _still_queued(self, delivery: Delivery) -> bool:
        try:
            await with_retries(lambda: self.bus.js.get_msg(self.bus.names.tasks_stream, delivery.seq),
                               what=f"reading task message {delivery.seq}")
        except NotFoundError:
            return False
        return True
