"""The `/lg` stream modes beyond `values`/`updates`/`messages-tuple`/`custom`, each made from the
same run events as those (stream.py's `RunStream` calls in here; no stream of their own):

- `messages` (the older partial-message form): `messages/metadata {id: {metadata}}` the first
  time a message streams, `messages/partial [message so far]` per token, `messages/complete
  [message]` when its node ends.
- `events` (`astream_events` v2 shapes, `{event, name, run_id, parent_ids, tags, metadata,
  data}`): `on_chain_start`/`on_chain_end` for the run (`name: "LangGraph"`) and each node,
  `on_chat_model_start`/`on_chat_model_stream {chunk}`/`on_chat_model_end {output}` for a
  node's model, `on_tool_start {input}`/`on_tool_end {output}` for a tool call.
- `tasks`: `{id, name, input, triggers}` when a node starts, `{id, name, error, result,
  interrupts}` when it ends (`result`: its writes, `[[channel, value]]`).
- `checkpoints`: the checkpoint of the run's question when it opens (if the run made it), then
  the turn's own once the run ends or waits, `{config, parent_config, values, metadata, next,
  tasks}` (as `GET /threads/{id}/history` shows them afterwards).
- `debug`: the last two wrapped as LangGraph's debug frames, `{type: task | task_result |
  checkpoint, timestamp, step, payload}`.

All of it is pure: a frame depends on the events before it only, so a stream read again from
the log's start makes the same frames (ids stay resumable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from services.gateway.chat.modes import ANSWER_NODE
from services.gateway.protocols.langgraph import messages
from shared.contract.events import (
    AnyEvent,
    NodeEndEvent,
    NodeStartEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
)

EXTRA_MODES: Final = frozenset({"messages", "events", "tasks", "checkpoints", "debug"})
GRAPH_NAME: Final = "LangGraph"
Frame = tuple[str, Any]


def _ts(event: AnyEvent | None) -> str:
    stamp = event.ts if event is not None and event.ts is not None else datetime.now(UTC)
    return stamp.isoformat()


@dataclass
class ModeFrames:
    """One run's frames in the extra modes (see the module docstring)."""

    run_id: str
    thread_id: str
    parent: str | None  # its checkpoint's parent: its question's (checkpoints.py), or the turn before
    step: int  # the run's checkpoint's depth on its branch
    modes: frozenset[str]
    asked_from: str | None = None  # the parent of its question's checkpoint, when the run made that one
    _text: dict[str, str] = field(default_factory=dict)  # message id → what streamed of it so far
    _tasks: dict[str, str] = field(default_factory=dict)  # node id → the id of its running task
    _tools: dict[str, str] = field(default_factory=dict)  # call id → its tool
    _steps: int = 0

    def _meta(self, node: str) -> dict[str, Any]:
        return {"langgraph_node": node, "langgraph_step": self._steps, "run_id": self.run_id,
                "thread_id": self.thread_id, "langgraph_checkpoint_ns": ""}

    def _event(self, name: str, kind: str, run_id: str, data: dict[str, Any], node: str | None = None) -> Frame:
        parents = [] if run_id == self.run_id else [self.run_id]
        return "events", {"event": kind, "name": name, "run_id": run_id, "parent_ids": parents,
                          "tags": [] if node is None else [f"graph:step:{self._steps}"],
                          "metadata": {} if node is None else self._meta(node), "data": data}

    def opening(self, state: dict[str, Any]) -> list[Frame]:
        """The run's start, and the checkpoint of its question when the run made it (its state is
        the run's opening state; a run that answers a question again starts at that one's)."""
        out: list[Frame] = []
        if "events" in self.modes:
            out.append(self._event(GRAPH_NAME, "on_chain_start", self.run_id, {"input": state}))
        if self.parent is not None and self.asked_from is not None:
            task: dict[str, Any] = {"id": self.run_id, "name": ANSWER_NODE, "interrupts": [], "state": None}
            out.extend(self._checkpoint(self.parent, self.asked_from, self.step - 1, state, [ANSWER_NODE], [task],
                                        None))
        return out

    def token(self, event: TokenEvent) -> list[Frame]:
        node = event.node_id or ANSWER_NODE
        message_id = messages.answer_id(self.run_id, None if node == ANSWER_NODE else node)
        first = message_id not in self._text
        self._text[message_id] = self._text.get(message_id, "") + event.text
        out: list[Frame] = []
        if "messages" in self.modes:
            if first:
                out.append(("messages/metadata", {message_id: {"metadata": {**self._meta(node),
                                                                            "ls_model_name": event.model}}}))
            out.append(("messages/partial", [messages.ai(message_id, self._text[message_id], model=event.model)]))
        if "events" in self.modes:
            model_run = f"{self.run_id}:{node}:model"
            if first:
                out.append(self._event(event.model or "model", "on_chat_model_start", model_run, {"input": {}}, node))
            chunk = messages.ai(message_id, event.text, model=event.model, chunk=True)
            out.append(self._event(event.model or "model", "on_chat_model_stream", model_run, {"chunk": chunk}, node))
        return out

    def node_start(self, event: NodeStartEvent) -> list[Frame]:
        node = event.node_id or ""
        self._steps += 1
        task_id = f"{self.run_id}:{node}:{event.n}"
        self._tasks[node] = task_id
        out: list[Frame] = []
        payload = {"id": task_id, "name": node, "input": None, "triggers": [f"branch:to:{node}"]}
        if "tasks" in self.modes:
            out.append(("tasks", payload))
        if "debug" in self.modes:
            out.append(("debug", {"type": "task", "timestamp": _ts(event), "step": self._steps, "payload": payload}))
        if "events" in self.modes:
            out.append(self._event(node, "on_chain_start", task_id, {"input": None}, node))
        return out

    def node_end(self, event: NodeEndEvent, update: dict[str, Any] | None) -> list[Frame]:
        """`update`: what the node wrote (None: it failed or was cancelled)."""
        node = event.node_id or ""
        task_id = self._tasks.pop(node, f"{self.run_id}:{node}:{event.n}")
        message_id = messages.answer_id(self.run_id, None if node == ANSWER_NODE else node)
        out: list[Frame] = []
        if message_id in self._text and update is not None:
            said = messages.ai(message_id, self._text[message_id])
            if "messages" in self.modes:
                out.append(("messages/complete", [said]))
            if "events" in self.modes:
                out.append(self._event("model", "on_chat_model_end", f"{self.run_id}:{node}:model",
                                       {"output": said}, node))
        payload = {"id": task_id, "name": node, "error": event.error if update is None else None,
                   "result": [[key, value] for key, value in (update or {}).items()], "interrupts": []}
        if "tasks" in self.modes:
            out.append(("tasks", payload))
        if "debug" in self.modes:
            out.append(("debug", {"type": "task_result", "timestamp": _ts(event), "step": self._steps,
                                  "payload": payload}))
        if "events" in self.modes:
            out.append(self._event(node, "on_chain_end", task_id, {"output": update, "input": None}, node))
        return out

    def tool(self, event: ToolCallEvent | ToolResultEvent) -> list[Frame]:
        if "events" not in self.modes:
            return []
        node = event.node_id or ANSWER_NODE
        if isinstance(event, ToolCallEvent):
            self._tools[event.call_id] = event.tool
            return [self._event(event.tool, "on_tool_start", event.call_id, {"input": event.args}, node)]
        output = event.result if event.result is not None else event.result_preview
        return [self._event(self._tools.get(event.call_id, "tool"), "on_tool_end", event.call_id,
                            {"output": output if event.ok else {"error": event.error}}, node)]

    def checkpoint(self, state: dict[str, Any], event: AnyEvent | None,
                   interrupt: dict[str, Any] | None = None) -> list[Frame]:
        """The turn's checkpoint, once the run ended (`interrupt` None) or waits on `interrupt`."""
        node = interrupt["value"]["node_id"] if interrupt is not None else None
        tasks = [] if interrupt is None else [{"id": interrupt["id"], "name": node, "interrupts": [interrupt],
                                               "state": None}]
        return self._checkpoint(self.run_id, self.parent, self.step, state, [node] if node else [], tasks, event)

    def _checkpoint(self, checkpoint_id: str, parent: str | None, step: int, state: dict[str, Any], nodes: list[str],
                    tasks: list[dict[str, Any]], event: AnyEvent | None) -> list[Frame]:
        if not self.modes & {"checkpoints", "debug"}:
            return []
        payload = {
            "config": self._config(checkpoint_id), "parent_config": self._config(parent),
            "values": {k: v for k, v in state.items() if k != "__interrupt__"},
            "metadata": {"source": "loop", "step": step, "run_id": self.run_id, "thread_id": self.thread_id,
                         "parents": {}},
            "next": nodes, "tasks": tasks,
        }
        out: list[Frame] = []
        if "checkpoints" in self.modes:
            out.append(("checkpoints", payload))
        if "debug" in self.modes:
            out.append(("debug", {"type": "checkpoint", "timestamp": _ts(event), "step": step, "payload": payload}))
        return out

    def closing(self, state: dict[str, Any]) -> list[Frame]:
        if "events" not in self.modes:
            return []
        return [self._event(GRAPH_NAME, "on_chain_end", self.run_id, {"output": state})]

    def _config(self, checkpoint_id: str | None) -> dict[str, Any] | None:
        if checkpoint_id is None:
            return None
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
