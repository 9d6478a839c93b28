"""A chat run's events as LangGraph stream frames (pure: no bus): what each stream mode makes of
each event, the interrupt, the ending, and the resumable frame ids."""

from __future__ import annotations

import pytest

from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph.stream import RunStream, format_id, modes_of, parse_id
from shared.contract.events import (
    ApprovalRequestEvent,
    DoneEvent,
    NodeEndEvent,
    NodeStartEvent,
    StatusEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)

HUMAN = {"type": "human", "content": "Capital of Norway?", "id": "m1"}


def run_stream(*modes: str) -> RunStream:
    return RunStream("t_1", "th", [HUMAN], modes_of(list(modes)))


def test_every_mode_makes_its_frames_and_only_those() -> None:
    stream = run_stream("values", "updates", "messages-tuple", "custom")
    assert [name for name, _ in stream.opening()] == ["metadata", "values"]
    assert stream.frames(StatusEvent(task_id="t_1", status="running", n=1)) == []
    [(name, (chunk, meta))] = stream.frames(TokenEvent(task_id="t_1", node_id="ans", text="Oslo", n=2))
    assert name == "messages" and chunk["type"] == "AIMessageChunk" and chunk["content"] == "Oslo"
    assert chunk["id"] == "run-t_1" and meta == {"langgraph_node": "ans", "run_id": "t_1", "thread_id": "th",
                                                 "ls_model_name": None}
    [(name, custom)] = stream.frames(ToolCallEvent(task_id="t_1", node_id="ans", call_id="c", tool="kb", n=3))
    assert name == "custom" and custom["type"] == "tool.call" and custom["tool"] == "kb"
    [(name, update)] = stream.frames(NodeEndEvent(task_id="t_1", node_id="ans", status="done", duration_ms=1, n=4))
    assert name == "updates" and update["ans"]["messages"][0]["content"] == "Oslo"
    (values_name, values), ending = stream.frames(DoneEvent(task_id="t_1", status="done",
                                                            output={"answer": "Oslo."}, n=5))
    assert values_name == "values" and [m["content"] for m in values["messages"]] == ["Capital of Norway?", "Oslo."]
    assert ending == ("end", None)

    only_tokens = run_stream("messages-tuple")
    assert [name for name, _ in only_tokens.opening()] == ["metadata"]
    assert only_tokens.frames(ToolCallEvent(task_id="t_1", call_id="c", tool="kb", n=3)) == []
    assert [n for n, _ in only_tokens.frames(DoneEvent(task_id="t_1", status="done", n=5))] == ["end"]


def test_an_approval_is_an_interrupt_and_a_failure_an_error() -> None:
    stream = run_stream("values", "updates")
    request = ApprovalRequestEvent(task_id="t_1", node_id="approve", message="Approve this plan?", n=7)
    assert stream.frames(request) == []  # whether it still waits is the reader's question
    (u, update), (v, values) = stream.interrupted(request)  # then `end`, which closes the stream
    interrupt = {"value": {"kind": "approval", "message": "Approve this plan?", "node_id": "approve",
                           "run_id": "t_1",
                           # the LangChain v1 human-in-the-loop shape agent-chat-ui renders
                           "action_requests": [{"name": "approve", "args": {}, "description": "Approve this plan?"}],
                           "review_configs": [{"action_name": "approve", "allowed_decisions": ["approve", "reject"]}]},
                 "id": "t_1:approve"}
    assert (u, update) == ("updates", {"__interrupt__": [interrupt]})
    assert v == "values" and values["__interrupt__"] == [interrupt]

    call = ApprovalRequestEvent(task_id="t_1", node_id="ans", message="Run wipe?", call_id="c2", tool="wipe",
                                args={"path": "/tmp"}, n=9)
    [(_, tool_update)] = run_stream("updates").interrupted(call)[:1]
    assert tool_update["__interrupt__"] == [{"value": {"kind": "approval", "message": "Run wipe?", "node_id": "ans",
                                                       "run_id": "t_1",
                                                       "action_requests": [{"name": "wipe", "args": {"path": "/tmp"},
                                                                            "description": "Run wipe?"}],
                                                       "review_configs": [{
                                                           "action_name": "wipe",
                                                           "allowed_decisions": ["approve", "edit", "reject"]}],
                                                       "tool": "wipe", "call_id": "c2",
                                                       "args": {"path": "/tmp"}}, "id": "t_1:ans:c2"}]

    failing = run_stream("values")
    failing.frames(TokenEvent(task_id="t_1", node_id="ans", text="Half", n=2))
    failing.frames(StatusEvent(task_id="t_1", status="failed", error="too slow", code="timeout", n=3))
    (_, values), (name, error) = failing.frames(DoneEvent(task_id="t_1", status="failed", error="too slow", n=4))
    assert values["messages"][-1]["content"] == "Half"
    assert values["messages"][-1]["response_metadata"]["message_type"] == "interrupted"
    assert (name, error) == ("error", {"error": "timeout", "message": "The model timed out."})


def test_frame_ids_round_trip_and_order_as_the_log() -> None:
    assert parse_id(None) is None and parse_id("") is None and parse_id("-1") is None  # LangGraph's "from the start"
    assert parse_id("12") == (12, 0) and parse_id("12.3") == (12, 3)
    assert format_id((12, 0)) == "12" and format_id((12, 3)) == "12.3"
    assert (12, 3) < (13, 0) < (13, 1)
    for bad in ("x", "-2", "1.-2", "1.2.3"):
        with pytest.raises(ApiProblem):
            parse_id(bad)


def test_unknown_or_empty_stream_modes_fall_back_to_values() -> None:
    assert modes_of(None) == {"values"} and modes_of([""]) == {"values"}
    assert modes_of(["tools", "messages-tuple"]) == {"messages-tuple"}


def _run(stream: RunStream) -> list[tuple[str, object]]:
    """A run that asks a tool, streams its answer and ends: every frame, the opening's first."""
    out = list(stream.opening())
    for event in (StatusEvent(task_id="t_1", status="running", n=1),
                  NodeStartEvent(task_id="t_1", node_id="ans", kind="agent", n=2),
                  ToolCallEvent(task_id="t_1", node_id="ans", call_id="c", tool="kb", args={"q": "x"}, n=3),
                  ToolResultEvent(task_id="t_1", node_id="ans", call_id="c", ok=True, duration_ms=1, result="hit",
                                  n=4),
                  TokenEvent(task_id="t_1", node_id="ans", text="Os", model="m", n=5),
                  TokenEvent(task_id="t_1", node_id="ans", text="lo", model="m", n=6),
                  NodeEndEvent(task_id="t_1", node_id="ans", status="done", duration_ms=1, n=7),
                  DoneEvent(task_id="t_1", status="done", output={"answer": "Oslo"}, n=8)):
        out.extend(stream.frames(event))
    return out


def test_the_legacy_messages_mode_streams_partial_then_complete_messages() -> None:
    frames = _run(run_stream("messages"))
    assert [name for name, _ in frames] == ["metadata", "messages/metadata", "messages/partial", "messages/partial",
                                            "messages/complete", "end"]
    assert frames[1][1] == {"run-t_1": {"metadata": {"langgraph_node": "ans", "langgraph_step": 1, "run_id": "t_1",
                                                     "thread_id": "th", "langgraph_checkpoint_ns": "",
                                                     "ls_model_name": "m"}}}
    assert [f[1][0]["content"] for f in frames[2:5]] == ["Os", "Oslo", "Oslo"]  # type: ignore[index]
    assert all(f[1][0]["type"] == "ai" and f[1][0]["id"] == "run-t_1" for f in frames[2:5])  # type: ignore[index]


def test_events_mode_is_astream_events_shapes() -> None:
    frames = _run(run_stream("events"))
    kinds = [(data["event"], data["name"]) for name, data in frames if name == "events"]  # type: ignore[index]
    assert kinds == [("on_chain_start", "LangGraph"), ("on_chain_start", "ans"), ("on_tool_start", "kb"),
                     ("on_tool_end", "kb"), ("on_chat_model_start", "m"), ("on_chat_model_stream", "m"),
                     ("on_chat_model_stream", "m"), ("on_chat_model_end", "model"), ("on_chain_end", "ans"),
                     ("on_chain_end", "LangGraph")]
    events = [data for name, data in frames if name == "events"]
    assert events[5]["data"]["chunk"]["content"] == "Os" and events[5]["metadata"]["langgraph_node"] == "ans"  # type: ignore[index]
    assert events[3]["data"]["output"] == "hit" and events[2]["data"]["input"] == {"q": "x"}  # type: ignore[index]
    assert [m["content"] for m in events[-1]["data"]["output"]["messages"]] == ["Capital of Norway?", "Oslo"]  # type: ignore[index]
    assert events[0]["parent_ids"] == [] and events[1]["parent_ids"] == ["t_1"]  # type: ignore[index]


def test_tasks_checkpoints_and_debug_modes() -> None:
    stream = RunStream("t_1", "th", [HUMAN], modes_of(["tasks", "checkpoints", "debug"]), parent="t_0", step=1)
    frames = _run(stream)
    assert [name for name, _ in frames] == ["metadata", "tasks", "debug", "tasks", "debug", "checkpoints", "debug",
                                            "end"]
    start, result, checkpoint = frames[1][1], frames[3][1], frames[5][1]
    assert start == {"id": "t_1:ans:2", "name": "ans", "input": None, "triggers": ["branch:to:ans"]}
    assert result["id"] == "t_1:ans:2" and result["error"] is None  # type: ignore[index]
    assert result["result"][0][0] == "messages" and result["result"][0][1][0]["content"] == "Oslo"  # type: ignore[index]
    assert checkpoint["config"]["configurable"]["checkpoint_id"] == "t_1"  # type: ignore[index]
    assert checkpoint["parent_config"]["configurable"]["checkpoint_id"] == "t_0"  # type: ignore[index]
    assert checkpoint["next"] == [] and checkpoint["metadata"]["step"] == 1  # type: ignore[index]
    assert [d["type"] for n, d in frames if n == "debug"] == ["task", "task_result", "checkpoint"]  # type: ignore[index]

    waiting = RunStream("t_1", "th", [HUMAN], modes_of(["checkpoints"]))
    request = ApprovalRequestEvent(task_id="t_1", node_id="approve", message="Approve?", n=7)
    [(name, paused)] = waiting.interrupted(request)
    assert name == "checkpoints" and paused["next"] == ["approve"] and paused["parent_config"] is None
    assert paused["tasks"][0]["interrupts"][0]["id"] == "t_1:approve"
