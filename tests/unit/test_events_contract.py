"""Events: numbered and timed when emitted (`stamp`), and every type round-trips through JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.contract.events import NodeEndEvent, StatusEvent, TokenEvent, parse_event
from shared.contract.models import Usage


def test_stamp_numbers_and_times_an_event_as_emitted() -> None:
    event = TokenEvent(task_id="t1", node_id="a", text="hi")
    assert (event.n, event.ts) == (0, None)
    before = datetime.now(UTC)
    event.stamp(7)
    assert event.n == 7 and event.ts is not None and before <= event.ts <= datetime.now(UTC)
    assert {"n", "ts"} <= event.model_fields_set  # a dump of what was set includes them
    assert event.model_dump(exclude_unset=True)["n"] == 7
    again = parse_event(event.model_dump_json(exclude_none=True))
    assert again == event and isinstance(again, TokenEvent)


def test_every_kind_of_event_round_trips() -> None:
    events = [
        StatusEvent(task_id="t", status="running", chain_revision=3, prompt_versions={"sys": 2}),
        NodeEndEvent(task_id="t", node_id="a", status="done", duration_ms=1.5, usage=Usage(prompt_tokens=2)),
        TokenEvent(task_id="t", node_id="a", text="é✓"),
    ]
    for n, event in enumerate(events, 1):
        event.stamp(n)
        assert parse_event(event.model_dump_json(exclude_none=True)) == event
