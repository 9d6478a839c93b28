"""`ask_agent`: the chat agent as an MCP tool. `{text, mode?, conversation_id?}` posts `text` to
the caller's conversation `conversation_id` (its next run, in the conversation's FIFO, with its
memory window), or to a new conversation titled by it; the answer comes back with the
conversation's id, so the next call can go on in it."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from starlette.datastructures import State

from services.gateway.access.principal import Principal
from services.gateway.chat import conversations, queue
from services.gateway.chat.modes import MODES
from services.gateway.chat.states import RUN_TERMINAL
from services.gateway.chat.tables import ChatRun
from services.gateway.runs.submit import BeforeQueue
from shared.errors import AgentixError

NAME = "ask_agent"
TITLE_CHARS = 80
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": queue.MAX_TEXT, "description": "what to ask"},
        "mode": {"type": "string", "enum": list(MODES), "default": "react",
                 "description": "direct: one answer; react: the agent may use tools; plan: plans, then acts"},
        "conversation_id": {"type": "string", "description": "go on in this conversation (else a new one)"},
    },
    "required": ["text"],
    "additionalProperties": False,
}  # fmt: skip
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string"},
        "conversation_id": {"type": "string"},
        "status": {"type": "string"},
        "output": {},
        "error": {"type": ["string", "null"]},
    },
    "required": ["task_id", "conversation_id", "status"],
}

TOOL = types.Tool(
    name=NAME,
    title="Ask the Agentix agent",
    description="Asks Agentix's chat agent (with your knowledge bases, memory and tools) and returns its answer; "
                "pass the returned conversation_id to go on in the same conversation.",
    input_schema=INPUT_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    annotations=types.ToolAnnotations(title="Ask the Agentix agent", read_only_hint=False, destructive_hint=False,
                                      idempotent_hint=False, open_world_hint=True),
)  # fmt: skip


class BadArguments(AgentixError, ValueError):
    """`ask_agent`'s arguments are not what its input schema says (an `isError` result)."""

    code = "invalid-arguments"
    http_status = 422


def arguments(args: dict[str, Any]) -> tuple[str, Any, str | None]:
    """(text, mode, conversation_id), or BadArguments naming what is wrong."""
    unknown = sorted(set(args) - set(INPUT_SCHEMA["properties"]))
    if unknown:
        raise BadArguments(f"ask_agent takes no argument(s): {', '.join(unknown)}")
    text, mode, conversation_id = args.get("text"), args.get("mode", "react"), args.get("conversation_id")
    if not isinstance(text, str) or not text.strip():
        raise BadArguments("ask_agent needs `text`, a non-empty string")
    if mode not in MODES:
        raise BadArguments(f"`mode` is one of {', '.join(MODES)}")
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise BadArguments("`conversation_id` is a string")
    return text, mode, conversation_id


async def start(st: State, who: Principal, args: dict[str, Any], grey: list[str],
                before_queue: BeforeQueue) -> tuple[str, str]:  # fmt: skip
    """Post the question; (run id, conversation id). ApiProblem as the chat API answers it."""
    text, mode, conversation_id = arguments(args)
    if conversation_id is None:
        title = " ".join(text.split())[:TITLE_CHARS]
        created = await st.db.run(conversations.create, who, conversations.NewConversation(title=title, mode=mode))
        conversation_id = str(created["id"])
    accepted = await queue.post_message(st.db, st.bus, who, conversation_id, queue.PostMessage(text=text, mode=mode),
                                        grey, before_queue)  # fmt: skip
    return str(accepted["run"]["id"]), conversation_id


async def answered(st: State, run_id: str) -> None:
    """Until the conversation queue has written the run's answer (its record ended), so that the
    conversation read right after the call shows it (at most the record watch's wait)."""
    watch = getattr(st, "record_watch", None)
    if watch is None:
        return

    def state(session: Any) -> str | None:
        run = session.get(ChatRun, run_id)
        return run.state if run is not None else None

    async def agrees() -> bool:
        current = await st.db.run(state)
        return current is None or current in RUN_TERMINAL

    await watch.until(run_id, agrees)
