"""Every protocol's stream of a run is a translator of the run's event log (pure: no bus). Here
each translator reads recorded logs of real runs (`tests/data/runs/*.jsonl`, recorded by
`tests/support/record_runs.py`) and must make exactly the golden frames kept beside them
(`tests/data/runs/golden/`): the API's task and chat SSE, `/lg` in every stream mode, `/v1`
chunks; a run parked on an approval ends the `/lg` and `/v1` streams there. And a stream resumed
after any frame it made gives exactly the frames an unbroken stream gives after that frame.

After a deliberate change of a protocol's frames, write the goldens anew and review their diff:
    AGENTIX_UPDATE_GOLDEN=1 python -m pytest -q tests/unit/test_run_translators.py
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from services.gateway.chat.answers import error_event
from services.gateway.protocols.langgraph.stream import LgFrames, RunStream, modes_of, parse_id
from services.gateway.protocols.openai.start import Started
from services.gateway.protocols.openai.stream import CompletionFrames
from services.gateway.protocols.openai.translate import Translator as Answer
from services.gateway.protocols.openai.wire import Head
from services.gateway.runs.frames import Entry, NativeFrames, Translator
from shared.contract.events import parse_event

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
GOLDEN = RUNS / "golden"
UPDATE = os.environ.get("AGENTIX_UPDATE_GOLDEN") == "1"
LOGS = ("chat_tool", "chat_plan_approved", "chat_failed", "task_branch_fanout")
HUMAN = {"type": "human", "content": "the question", "id": "m1"}
LG_MODES = ("values", "updates", "messages-tuple", "custom", "values+updates+messages-tuple+custom")


def log(name: str) -> list[Entry]:
    rows = [json.loads(line) for line in (RUNS / f"{name}.jsonl").read_text().splitlines() if line]
    return [Entry(row["seq"], parse_event(json.dumps(row["event"]))) for row in rows]


def until_parked(entries: list[Entry]) -> list[Entry]:
    """The log as a reader finds it while the run is parked on its first approval."""
    waiting = next(i for i, e in enumerate(entries) if e.event.type == "status" and e.event.status == "waiting")
    return entries[:waiting + 1]


def stream(translator: Translator, entries: Iterable[Entry], live: bool = False) -> bytes:
    """What a client gets: as `runs.stream.run_frames` makes it (`live`: the log read so far is
    all there is yet, and the reader is told it caught up)."""
    out = [translator.opening()]
    for entry in entries:
        if entry.seq <= translator.after_seq:
            continue
        out.append(translator.frames(entry))
        if translator.finished:
            break
    if live and not translator.finished:
        out.append(translator.caught_up())
    if translator.finished:
        out.append(translator.closing())
    return b"".join(out)


def api(channels: tuple[str, ...] | None = None, added: Any = None) -> Callable[[int], Translator]:
    return lambda after: NativeFrames(after, channels, added)


def lg(modes: str) -> Callable[[Any], Translator]:
    def make(after: Any = None) -> Translator:
        return LgFrames(RunStream("t_run", "c_thread", [HUMAN], modes_of(modes.split("+"))), after)
    return make


def v1(entries: list[Entry], mode: str | None) -> Translator:
    started = Started(run_id=entries[0].event.task_id, conversation_id="c_thread")
    head = Head(id=f"chatcmpl-{started.run_id}", created=1_800_000_000, model="agentix-react")
    return CompletionFrames(head, Answer.for_mode(started, mode), include_usage=True)


CASES: dict[str, tuple[Callable[..., Translator], str]] = {
    "api-events": (api(), "native"),
    "api-stream": (api(("token", "status")), "native"),
    "api-exec": (api(("exec", "status")), "native"),
    "chat-events": (api(added=error_event), "native"),
    **{f"lg-{modes}": (lg(modes), "lg") for modes in LG_MODES},
}


def check(name: str, made: bytes) -> None:
    path = GOLDEN / f"{name}.sse"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(made)
    assert path.exists(), f"no golden {path.name}: write it with AGENTIX_UPDATE_GOLDEN=1 and review it"
    assert made.decode() == path.read_text(), f"{name} differs from its golden frames"


@pytest.mark.parametrize("log_name", LOGS)
@pytest.mark.parametrize("case", list(CASES))
def test_each_translator_makes_its_golden_frames(log_name: str, case: str) -> None:
    make, _ = CASES[case]
    check(f"{log_name}.{case}", stream(make(0 if case.startswith(("api", "chat")) else None), log(log_name)))


@pytest.mark.parametrize("log_name", LOGS)
@pytest.mark.parametrize("mode", [None, "plan"])
def test_v1_chunks_are_golden(log_name: str, mode: str | None) -> None:
    entries = log(log_name)
    check(f"{log_name}.v1-{mode or 'react'}", stream(v1(entries, mode), entries))


@pytest.mark.parametrize("modes", LG_MODES)
def test_a_parked_run_ends_the_lg_stream_with_its_interrupt(modes: str) -> None:
    parked = until_parked(log("chat_plan_approved"))
    made = stream(lg(modes)(), parked, live=True)
    check(f"chat_plan_approved.parked.lg-{modes}", made)
    assert made.endswith(b"event: end\ndata: null\n\n")
    # Read on after the approval, the same log does not stop there.
    assert b"__interrupt__" not in stream(lg(modes)(), log("chat_plan_approved"), live=True)


def test_a_parked_run_ends_the_v1_answer_with_where_to_approve_it() -> None:
    parked = until_parked(log("chat_plan_approved"))
    made = stream(v1(parked, "plan"), parked, live=True)
    check("chat_plan_approved.parked.v1-plan", made)
    assert b"waits for a human approval" in made and made.endswith(b"data: [DONE]\n\n")


def frame_ids(made: bytes) -> list[str]:
    return re.findall(rb"^id: (\S+)$", made, re.M)  # type: ignore[return-value]


def frames_after(made: bytes, frame_id: bytes, added_belong_to_it: bool) -> bytes:
    """What follows the frame with `frame_id` in an unbroken stream; with `added_belong_to_it`,
    without the frames the API adds after that event (no `id`: they are not in the log, and go
    with their event — a client that has the event had them)."""
    at = made.index(b"id: " + frame_id + b"\n")
    end = made.index(b"\n\n", at) + 2
    while added_belong_to_it and end < len(made) and not made.startswith(b"id: ", end):
        end = made.index(b"\n\n", end) + 2
    return made[end:]


@pytest.mark.parametrize("log_name", LOGS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_resumed_stream_is_the_rest_of_the_unbroken_one(log_name: str, case: str) -> None:
    make, kind = CASES[case]
    entries = log(log_name)
    unbroken = stream(make(0 if kind == "native" else None), entries)
    ids = frame_ids(unbroken)
    assert ids, "a stream of a whole run has frames with ids"
    for frame_id in ids:
        after: Any = int(frame_id) if kind == "native" else parse_id(frame_id.decode())
        rest = stream(make(after), entries)
        assert rest == frames_after(unbroken, frame_id, kind == "native"), f"{case}: resumed after {frame_id!r}"
