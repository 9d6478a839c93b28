"""The one tool executor: events around a call (what they show, in which order), refused calls,
failed replies, and runtime values injected over what the arguments held."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.memory import EventLog, LocalTools
from services.dispatcher.engine.tool_calls import execute_tool, inject, reply_error
from shared.contract.events import ToolCallEvent, ToolResultEvent
from shared.contract.tools import ToolMeta, ToolReply

META = ToolMeta(task_id="t1", node_id="n1", user_id="u1")


def tools() -> LocalTools:
    local = LocalTools()

    async def echo(args: dict[str, Any], meta: ToolMeta) -> dict[str, Any]:
        return {"got": args, "node": meta.node_id}

    async def broken(args: dict[str, Any], meta: ToolMeta) -> None:
        raise ValueError("no such row")

    local.add("echo", echo)
    local.add("broken", broken)
    return local


async def test_a_call_is_announced_then_answered_with_its_preview() -> None:
    log, local = EventLog(), tools()
    reply = await execute_tool(local, log.emit, META, call_id="c1", tool="echo", args={"q": "x", "user_id": "u1"},
                               shown_args={"q": "x"})
    assert reply.ok and reply.result == {"got": {"q": "x", "user_id": "u1"}, "node": "n1"}
    call, result = log.events
    assert isinstance(call, ToolCallEvent) and isinstance(result, ToolResultEvent)
    assert (call.task_id, call.node_id, call.call_id, call.tool) == ("t1", "n1", "c1", "echo")
    assert call.args == {"q": "x"}  # what the caller chose to show, not what the tool received
    assert result.ok and result.call_id == "c1" and result.error is None and result.duration_ms >= 0
    assert result.result_preview == '{"got": {"q": "x", "user_id": "u1"}, "node": "n1"}'


async def test_a_failed_reply_is_an_error_line_and_no_preview() -> None:
    log, local = EventLog(), tools()
    reply = await execute_tool(local, log.emit, META, call_id="c2", tool="broken", args={})
    assert not reply.ok and reply_error(reply) == "internal: no such row"
    result = log.of_type("tool.result")[0]
    assert not result.ok and result.error == "internal: no such row" and result.result_preview is None


async def test_a_refused_call_never_reaches_the_tool() -> None:
    log, local = EventLog(), tools()
    refusal = ToolReply.failure("approval_required", "echo is high-risk")
    reply = await execute_tool(local, log.emit, META, call_id="c3", tool="echo", args={"q": 1}, refused=refusal)
    assert reply is refusal and local.calls == []
    assert [e.type for e in log.events] == ["tool.call", "tool.result"]
    assert log.events[1].error == "approval_required: echo is high-risk"


def test_runtime_values_override_the_arguments_unless_unset() -> None:
    args = {"q": "x", "user_id": "someone-else", "session_id": "mine"}
    got = inject(args, ["user_id", "session_id"], {"user_id": "u1", "session_id": None})
    assert got is args and args == {"q": "x", "user_id": "u1", "session_id": "mine"}
