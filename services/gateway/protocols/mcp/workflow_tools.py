"""The caller's saved workflows as MCP tools (`workflow.<id>`): the input schema is the workflow's
input node's, a call is a task of the workflow (submitted as `POST /api/v1/tasks` submits it) whose
output comes back as `content` and `structuredContent` (`{task_id, status, output, error}`).

While it runs, a call that carries a `progressToken` is answered on an SSE stream with a
`notifications/progress` per finished node and per batch of tokens. A `notifications/cancelled`
naming the call — on any gateway replica: the endpoint publishes it on `P.mcp.cancel` — cancels the
task, as does the client going away. A run that parks on an approval ends the call with a result
naming the task and how to answer the approval."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server import ServerRequestContext
from nats.aio.msg import Msg
from sqlmodel import Session, col, select

from services.gateway.access.admission import check_text
from services.gateway.access.guardrail import strings_in
from services.gateway.access.principal import Principal
from services.gateway.problems import ApiProblem
from services.gateway.protocols.mcp import agent_tool
from services.gateway.runs import submit as runs
from services.gateway.runs.stream import NewRunFeed, run_entries
from services.gateway.tables import Workflow
from shared.contract.events import (
    ApprovalRequestEvent,
    DoneEvent,
    ErrorEvent,
    NodeEndEvent,
    NodeStartEvent,
    TokenEvent,
    ToolCallEvent,
)
from shared.contract.mcp import McpCancel
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.mcp")
PREFIX = "workflow."
MAX_TOOLS = 200  # the newest workflows of the caller that are listed
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string"},
        "status": {"type": "string", "enum": [*sorted(TERMINAL), "waiting"]},
        "output": {},
        "error": {"type": ["string", "null"]},
    },
    "required": ["task_id", "status"],
}
ANYTHING: dict[str, Any] = {"type": "object", "additionalProperties": True}


def input_schema(dsl: dict[str, Any]) -> dict[str, Any]:
    node = next((n for n in dsl.get("nodes", []) if isinstance(n, dict) and n.get("kind") == "input"), None)
    schema = (node.get("config") or {}).get("schema") if node else None
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else ANYTHING


def _owned(session: Session, user_id: str) -> list[Workflow]:
    query = select(Workflow).where(Workflow.user_id == user_id).order_by(col(Workflow.id).desc()).limit(MAX_TOOLS)
    return list(session.exec(query))


def mcp_tool(wf: Workflow) -> types.Tool:
    return types.Tool(
        name=f"{PREFIX}{wf.id}",
        title=wf.name,
        description=f"Runs the saved workflow {wf.name!r} as a task and returns its output.",
        input_schema=input_schema(wf.dsl),
        output_schema=OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(title=wf.name, read_only_hint=False, destructive_hint=False,
                                          idempotent_hint=False, open_world_hint=True),
    )  # fmt: skip


def result(task_id: str, status: str, output: Any = None, error: str | None = None,
           text: str | None = None) -> types.CallToolResult:  # fmt: skip
    structured = {"task_id": task_id, "status": status, "output": output, "error": error}
    if text is None:  # one output node's text is the text itself; anything else its JSON
        single = next(iter(output.values())) if isinstance(output, dict) and len(output) == 1 else output
        text = single if isinstance(single, str) else json.dumps(output, ensure_ascii=False, default=str)
        if error:
            text = f"Task {task_id} {status}: {error}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text or "")],
                                structured_content=structured, is_error=status not in ("done", "waiting"))  # fmt: skip


def failure(code: str, message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{code}: {message}")],
                                structured_content={"error": {"code": code, "message": message}},
                                is_error=True)  # fmt: skip


class Progress:
    """The call's `notifications/progress` (when the client sent a token) and its log lines,
    `notifications/message` (on a call answered as a stream: one with a progress token, or whose
    `_meta` names a log level; the SDK sends a 2026-protocol request's lines at or above the level
    it named only)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self.ctx = ctx
        meta: dict[str, Any] = dict(ctx.meta or {})
        self.token = meta.get("progress_token", meta.get("progressToken"))
        self.streams = self.token is not None or types.LOG_LEVEL_META_KEY in meta
        self.count = 0
        self.chars = 0

    async def log(self, level: types.LoggingLevel, data: dict[str, Any]) -> None:
        if self.streams:
            await self.ctx.session.send_log_message(level, data, logger="agentix.run",
                                                    related_request_id=str(self.ctx.request_id))  # fmt: skip

    async def step(self, message: str) -> None:
        if self.token is None:
            return
        self.count += 1
        await self.ctx.session.send_progress_notification(self.token, self.count, message=message,
                                                          related_request_id=str(self.ctx.request_id))  # fmt: skip

    async def entry(self, event: Any) -> None:
        if isinstance(event, NodeStartEvent):
            await self.log("info", {"event": "node.start", "node": event.node_id, "kind": event.kind})
        elif isinstance(event, NodeEndEvent):
            level: types.LoggingLevel = "info" if event.status == "done" else "warning"
            await self.log(level, {"event": "node.end", "node": event.node_id, "status": event.status,
                                   "duration_ms": round(event.duration_ms, 1), "error": event.error})  # fmt: skip
            await self.step(f"node {event.node_id} {event.status}")
        elif isinstance(event, ToolCallEvent):
            await self.log("info", {"event": "tool.call", "node": event.node_id, "tool": event.tool})
        elif isinstance(event, ErrorEvent):
            await self.log("error", {"event": "error", "node": event.node_id, "code": event.code,
                                     "message": event.message})  # fmt: skip
        elif isinstance(event, TokenEvent):  # the dispatcher batches a model's tokens into these
            self.chars += len(event.text)
            await self.step(f"node {event.node_id}: {self.chars} characters of tokens")


class McpWorkflows:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._running: dict[tuple[str, str], str] = {}  # (user, JSON-RPC id) -> task id, on this replica
        self._sub: Any = None
        self._sub_bus: Any = None

    async def listing(self, who: Principal) -> list[types.Tool]:
        """`ask_agent`, then the caller's workflows, newest first."""
        return [agent_tool.TOOL, *(mcp_tool(wf) for wf in await self.app.state.db.run(_owned, who.id))]

    async def _listen(self) -> None:
        bus = self.app.state.bus
        if self._sub is None or self._sub_bus is not bus:
            self._sub_bus = bus
            self._sub = await bus.nc.subscribe(bus.subjects.mcp_cancel, cb=self._cancel_received)

    async def cancel_request(self, who: Principal, request_id: str | int) -> None:
        """A client's `notifications/cancelled`: every replica hears it, the one running the call acts."""
        bus = getattr(self.app.state, "bus", None)
        if bus is not None:
            await bus.publish(bus.subjects.mcp_cancel, McpCancel(user_id=who.id, request_id=str(request_id)))

    async def _cancel_received(self, msg: Msg) -> None:
        try:
            cancel = McpCancel.model_validate_json(msg.data)
        except ValueError:
            return
        task_id = self._running.get((cancel.user_id, cancel.request_id))
        if task_id is not None:
            await self._cancel(Principal(id=cancel.user_id), task_id, "the MCP client cancelled the call")

    async def _cancel(self, who: Principal, task_id: str, why: str) -> None:
        st = self.app.state
        with contextlib.suppress(ApiProblem):  # already ended
            await runs.cancel(st.db, st.bus, who, task_id)
        log.info("mcp: %s (task %s)", why, task_id)

    async def call(self, ctx: ServerRequestContext[Any, Any], who: Principal, name: str,
                   args: dict[str, Any]) -> types.CallToolResult | None:  # fmt: skip
        """The call's result; None when `name` is neither `ask_agent` nor one of the caller's workflows."""
        st = self.app.state
        feed = NewRunFeed(st.run_feeds)
        conversation_id: str | None = None
        try:
            # The tier-1 guardrail on the run's input, as for `POST /tasks` (a block: an error result).
            grey = await check_text(st, ctx.request.scope, strings_in(args), "task input") if ctx.request else []
            if name == agent_tool.NAME:
                run_id, conversation_id = await agent_tool.start(st, who, args, grey, feed.open)
            else:
                body = runs.SubmitTask(workflow_id=name.removeprefix(PREFIX), input=args)
                task, _, _ = await runs.submit(st.db, st.bus, who, body, None, grey, before_queue=feed.open)
                run_id = task.id
        except agent_tool.BadArguments as exc:
            return failure("invalid-arguments", str(exc))
        except ApiProblem as problem:
            feed.release()
            if problem.status == 404 and name != agent_tool.NAME:
                return None
            said = [problem.detail, *(e.get("message", "") for e in problem.errors or [])]
            return failure(problem.type, "; ".join(said))
        feed.handed_over()
        outcome = await self._follow(ctx, who, run_id)
        if conversation_id is not None and outcome.structured_content is not None:
            outcome.structured_content["conversation_id"] = conversation_id
            if outcome.structured_content["status"] != "waiting":
                await agent_tool.answered(st, run_id)
        return outcome

    async def _follow(self, ctx: ServerRequestContext[Any, Any], who: Principal, task_id: str) -> types.CallToolResult:
        """The run's events until it ends (or parks on an approval), as progress when asked."""
        st = self.app.state
        await self._listen()
        key = (who.id, str(ctx.request_id))
        self._running[key] = task_id
        progress = Progress(ctx)
        await progress.step(f"task {task_id} submitted")
        ended = False
        try:
            async with contextlib.aclosing(run_entries(st, st.bus, task_id, 0, live=True)) as batches:
                async for batch in batches:
                    for entry in batch:
                        event = entry.event
                        if isinstance(event, DoneEvent):
                            ended = True
                            return result(task_id, event.status, event.output, event.error)
                        if isinstance(event, ApprovalRequestEvent):
                            ended = True  # parked: it waits for a person, not for this call
                            text = (f"Task {task_id} waits for an approval ({event.message}). Answer it with "
                                    f"POST /api/v1/tasks/{task_id}/approval; the task goes on from there.")
                            return result(task_id, "waiting", None, None, text=text)
                        await progress.entry(event)
            ended = True
            return result(task_id, "failed", None, "the gateway is stopping; the task goes on",
                          text=f"Task {task_id}: the gateway stopped following it; it goes on.")
        finally:
            self._running.pop(key, None)
            if not ended:  # the client went away or cancelled mid-run
                await asyncio.shield(self._cancel(who, task_id, "the MCP call ended before its task"))
