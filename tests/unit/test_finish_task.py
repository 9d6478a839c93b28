"""finish_task: the one way a task's event log ends (status, then done, then flush)."""

from __future__ import annotations

from shared.contract.events import DoneEvent, EventBase, StatusEvent, finish_task
from shared.contract.models import Usage
from shared.contract.task import RETRYABLE, TERMINAL, can_transition


class Sink:
    def __init__(self) -> None:
        self.events: list[EventBase] = []
        self.flushed_after = -1

    async def emit(self, event: EventBase) -> EventBase:
        self.events.append(event)
        return event

    async def flush(self) -> None:
        self.flushed_after = len(self.events)


class SinkWithoutFlush:
    def __init__(self) -> None:
        self.events: list[EventBase] = []

    async def emit(self, event: EventBase) -> EventBase:
        self.events.append(event)
        return event


async def test_status_then_done_then_flush() -> None:
    sink = Sink()
    usage = Usage(prompt_tokens=3, completion_tokens=4)
    await finish_task(sink, "t1", "done", output={"x": 1}, usage=usage)
    status, done = sink.events
    assert isinstance(status, StatusEvent) and (status.task_id, status.status, status.error) == ("t1", "done", None)
    assert isinstance(done, DoneEvent) and (done.status, done.output, done.usage) == ("done", {"x": 1}, usage)
    assert sink.flushed_after == 2


async def test_failure_carries_error_and_code_and_a_sink_may_have_no_flush() -> None:
    sink = SinkWithoutFlush()
    await finish_task(sink, "t2", "failed", error="boom", code="redelivery_exhausted")
    status, done = sink.events
    assert isinstance(status, StatusEvent) and (status.error, status.code) == ("boom", "redelivery_exhausted")
    assert isinstance(done, DoneEvent) and (done.status, done.error, done.output) == ("failed", "boom", None)


def test_retryable_states_are_terminal_and_reopen_only_by_retry() -> None:
    assert RETRYABLE < TERMINAL
    for status in RETRYABLE:
        assert can_transition(status, "running", retry=True)
        assert not can_transition(status, "running")
