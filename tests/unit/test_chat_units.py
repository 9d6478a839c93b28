"""Chat pieces without I/O: the run state machine, the memory window, the built-in graphs and
the error sentences."""

from __future__ import annotations

import logging

import pytest

from services.gateway.chat.answers import RunTrace, error_sentence
from services.gateway.chat.memory import FOLD_AT, WINDOW, made_summary, plan, window
from services.gateway.chat.modes import MODES, graph_for
from services.gateway.chat.queue import end_run
from services.gateway.chat.states import RUN_TERMINAL, can_move, follow, move, path, state_for
from services.gateway.chat.tables import ChatRun
from shared.contract.validate import validate_dsl


def test_the_state_machine_refuses_illegal_moves() -> None:
    assert can_move("queued", "planning") and can_move("queued", "running")
    assert can_move("planning", "awaiting_approval") and not can_move("planning", "running")
    assert can_move("awaiting_approval", "running") and can_move("awaiting_approval", "cancelled")
    assert can_move("running", "awaiting_approval") and can_move("running", "succeeded")
    assert not can_move("queued", "succeeded")
    for ended in RUN_TERMINAL:
        assert not any(can_move(ended, other) for other in ("queued", "running", "succeeded", "failed"))


def run_in(state: str, mode: str = "react") -> ChatRun:
    return ChatRun(id="t1", conversation_id="c1", seq=1, mode=mode, state=state)


def test_a_move_is_written_only_when_the_machine_allows_it(caplog: pytest.LogCaptureFixture) -> None:
    run = run_in("queued")
    assert move(run, "running") and run.state == "running" and run.ended_at is None
    assert not move(run, "running") and run.state == "running"  # there already: no change
    with caplog.at_level(logging.INFO, logger="agentix.gateway.chat"):
        assert not move(run, "planning")  # refused, and said so
    assert run.state == "running" and "refused the move running → planning" in caplog.text
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert move(run, "succeeded") and run.state == "succeeded" and run.ended_at is not None
    ended_at = run.ended_at
    assert not move(run, "failed") and (run.state, run.ended_at) == ("succeeded", ended_at)  # terminal stays


def test_the_fewest_legal_moves_between_two_states() -> None:
    assert path("queued", "succeeded", "react") == ["running", "succeeded"]
    assert path("queued", "awaiting_approval", "react") == ["running", "awaiting_approval"]
    assert path("queued", "awaiting_approval", "plan") == ["planning", "awaiting_approval"]
    assert path("planning", "succeeded", "plan") == ["awaiting_approval", "running", "succeeded"]
    assert path("queued", "planning", "react") is None  # only a plan run plans
    assert path("awaiting_approval", "cancelled", "plan") == ["cancelled"]
    assert path("running", "running", "react") == []
    assert path("succeeded", "failed", "react") is None and path("cancelled", "running", "plan") is None


def test_a_run_follows_its_tasks_latest_status_through_the_moves_not_recorded_yet() -> None:
    run = run_in("queued", "plan")  # its `running` is in a batch another replica has not applied
    assert follow(run, "awaiting_approval") and run.state == "awaiting_approval"
    assert not follow(run, "awaiting_approval")  # the late batch: nothing changes
    assert follow(run, "running") and run.state == "running"
    ended = run_in("cancelled")
    assert not follow(ended, "running") and ended.state == "cancelled"


def test_a_run_ends_as_its_task_did_through_the_moves_it_had_not_recorded_yet() -> None:
    run = run_in("queued")  # its `running` status is applied after its `done` (another replica's batch)
    assert end_run(run, RunTrace(status="done")) and run.state == "succeeded" and run.ended_at is not None
    interrupted = run_in("running")
    interrupted.stop_reason = "interrupt"
    assert end_run(interrupted, RunTrace(status="cancelled")) and interrupted.state == "interrupted"
    assert end_run(run_in("planning", "plan"), RunTrace(status=None))  # no `done` in its log: failed
    ended = run_in("failed")
    assert not end_run(ended, RunTrace(status="done")) and ended.state == "failed"  # refused


def test_task_statuses_map_to_run_states() -> None:
    assert state_for("running", "queued", "plan", None) == "planning"
    assert state_for("running", "awaiting_approval", "plan", None) == "running"
    assert state_for("running", "queued", "react", None) == "running"
    assert state_for("running", "planning", "plan", None) == "planning"  # a takeover while it plans
    assert state_for("waiting", "planning", "plan", None) == "awaiting_approval"
    assert state_for("done", "running", "react", None) == "succeeded"
    assert state_for("rejected", "awaiting_approval", "plan", None) == "cancelled"
    assert state_for("cancelled", "running", "react", "interrupt") == "interrupted"
    assert state_for("timeout", "running", "react", None) == "failed"
    assert state_for("budget_exceeded", "running", "react", None) == "budget_exceeded"
    assert state_for("submitted", "queued", "react", None) is None


def test_the_window_keeps_the_last_messages_and_never_starts_with_a_tool_result() -> None:
    said = [{"role": "user" if i % 2 else "assistant", "content": str(i)} for i in range(20)]
    assert window(said) == said[-16:]
    with_tool = [*said[:3], {"role": "tool", "content": "r"}, *said[4:19]]
    assert len(with_tool) == 19
    kept = window(with_tool)
    assert kept[0]["role"] != "tool" and kept == with_tool[4:]
    assert window([]) == []


def turns(count: int) -> list[dict[str, str]]:
    return [{"role": "assistant" if i % 2 else "user", "content": f"m{i}"} for i in range(count)]


def test_the_verbatim_part_slides_until_the_conversation_passes_24_messages_then_folds() -> None:
    said = turns(FOLD_AT - 1)  # with the new message: 24, not past it
    memory = plan(said, None, 0)
    assert not memory.folds and memory.verbatim == said and memory.task_input() == {"history": said}
    said = turns(FOLD_AT)  # the new message is the 25th
    memory = plan(said, None, 0)
    assert memory.folds and memory.verbatim == said[-WINDOW:] and memory.folded == said[:-WINDOW]
    assert memory.summarized == FOLD_AT - WINDOW
    fold = memory.task_input()["fold"]
    assert fold["summarized"] == 8 and "(none yet)" in fold["prompt"] and "user: m0" in fold["prompt"]


def test_a_fold_reads_the_old_summary_and_only_the_messages_that_newly_left_the_window() -> None:
    said = turns(30)
    memory = plan(said, "S1", 8)  # 22 unsummarised + the new one: not past 24, no fold
    assert not memory.folds and memory.verbatim == said[8:]
    assert memory.task_input()["history"][0] == {"role": "system",
                                                 "content": "Summary of the earlier conversation:\nS1"}
    said = turns(32)
    memory = plan(said, "S1", 8)
    assert memory.folded == said[8:16] and memory.summarized == 16 and memory.verbatim == said[16:]
    prompt = memory.task_input()["fold"]["prompt"]
    assert "S1" in prompt and "m8" in prompt and "m7\n" not in prompt and "m16" not in prompt
    assert plan(said, None, 8).summarized == 16  # no summary stored: counted from the start


def test_a_fold_never_leaves_a_tool_result_without_its_call() -> None:
    said = turns(FOLD_AT)
    said[FOLD_AT - WINDOW] = {"role": "tool", "content": "r"}
    memory = plan(said, None, 0)
    assert memory.verbatim[0]["role"] != "tool" and memory.folded[-1]["role"] == "tool"


def test_only_a_made_summary_is_kept() -> None:
    task_input = plan(turns(FOLD_AT), None, 0).task_input()
    assert made_summary(task_input, {"answer": "a", "summary": " S "}) == ("S", 8)
    assert made_summary(task_input, {"answer": "a", "summary": ""}) is None  # the fold failed
    assert made_summary({"history": []}, {"answer": "a", "summary": "S"}) is None


@pytest.mark.parametrize("kb", [False, True])
@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_graph_is_a_valid_workflow(mode: str, fold: bool, kb: bool) -> None:
    graph = graph_for(mode, fold=fold, kb=kb)
    result = validate_dsl(graph)
    assert not result.errors and not result.warnings
    kinds = [n["kind"] for n in graph["nodes"]]
    assert ("retriever" in kinds) == (kb and mode == "direct")
    assert all(("input.kb" in n["config"].get("system", "") + n["config"].get("prompt", "")) == kb
               for n in graph["nodes"] if n["id"] in ("ans", "plan"))


def test_error_sentences_say_what_happened() -> None:
    assert error_sentence("failed", "rate_limited", "m is rate limited (HTTP 429); retry after 12 s") == \
        "The model is rate limited — retry in 12 s."
    assert error_sentence("failed", "rate_limited", "slow down") == \
        "The model is rate limited — retry in a few seconds."
    assert error_sentence("failed", "timeout", "x") == "The model timed out."
    assert error_sentence("timeout", None, None) == "The model timed out."
    assert error_sentence("failed", "auth", "401") == "The model provider refused the API key."
    assert error_sentence("failed", "model_not_found", "unknown model 'x'") == "Unknown model id. unknown model 'x'"
    assert error_sentence("budget_exceeded", None, "token budget exceeded") == \
        "The token budget of this answer is exhausted."
    assert error_sentence("failed", "stream_broken", "x") == "The model's answer broke off mid-stream."
    assert error_sentence("failed", "tool_error", "the tool broke") == "the tool broke"
