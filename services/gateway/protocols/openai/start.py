"""How a completion request becomes a run on the conversation runtime.

- `X-Agentix-Conversation-Id: <id>`: the last user message is posted to that conversation (a
  chat run, in its FIFO, with the server's memory window; the sent history is not used).
- `X-Agentix-Conversation: new`: a conversation is created, the sent history is written into it
  as its earlier turns, and the last user message is posted as its first run.
- Neither (stateless): a plain task on the assistant's graph — the chat mode's built-in graph or
  the saved workflow — with the sent history as its `history` input. No conversation, run or
  message row is written, so there is nothing to clean up; the task row stays, as every task's
  does (usage, cost, audit, `GET /api/v1/tasks/{id}`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sqlmodel import Session

from services.gateway.access.principal import Principal
from services.gateway.chat import conversations, messages, queue
from services.gateway.chat.modes import ANSWER_NODE, Mode, graph_for
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.assistants import Assistant
from services.gateway.protocols.openai.request import Prompt
from services.gateway.runs import submit as tasks
from services.gateway.runs.submit import BeforeQueue
from shared.bus import Bus
from shared.contract.task import TaskOptions

CONVERSATION_ID: Final = "X-Agentix-Conversation-Id"
CONVERSATION: Final = "X-Agentix-Conversation"
NEW: Final = "new"  # the wish for a new conversation (conversation ids are `c_…`)
TITLE_CHARS: Final = 80


@dataclass(frozen=True)
class Started:
    run_id: str  # the task's id (a chat run's id is its task's)
    conversation_id: str | None  # None: stateless

    @property
    def approval_route(self) -> str:
        """Where a human decides an approval the run waits for."""
        kind = "runs" if self.conversation_id else "tasks"
        return f"/api/v1/{kind}/{self.run_id}/approval"


def _bad_header(message: str) -> ApiProblem:
    return ApiProblem(400, "Bad Request", message, errors=[{"code": "invalid_header", "message": message}])


def conversation_wish(conversation_id: str | None, conversation: str | None) -> str | None:
    """The conversation the request continues, "new" for a new one, or None (stateless)."""
    if conversation is not None and conversation.strip().lower() != NEW:
        raise _bad_header(f"{CONVERSATION} takes only the value `new`.")
    if conversation is not None and conversation_id:
        raise _bad_header(f"Send {CONVERSATION_ID} or {CONVERSATION}: new, not both.")
    if conversation is not None:
        return NEW
    return conversation_id.strip() if conversation_id and conversation_id.strip() else None


def _open_conversation(session: Session, user: Principal, mode: Mode, prompt: Prompt) -> str:
    """A new conversation holding the client's earlier turns (system messages are instructions
    to the model, not turns: they are not kept). They are numbered below the first run's turn,
    in the order sent, so the conversation's memory window reads them first."""
    title = " ".join(prompt.text.split())[:TITLE_CHARS] or None
    created = conversations.create(session, user, conversations.NewConversation(title=title, mode=mode))
    turns = [m for m in prompt.history if m["role"] != "system"]
    for index, turn in enumerate(turns):
        messages.add(session, created["id"], None, index - len(turns), turn["role"], turn["content"])
    return str(created["id"])


async def _post(db: Database, bus: Bus, user: Principal, conversation_id: str, mode: Mode, prompt: Prompt,
                grey: list[str], before_queue: BeforeQueue | None) -> Started:
    body = queue.PostMessage(text=prompt.text, mode=mode)
    accepted = await queue.post_message(db, bus, user, conversation_id, body, grey, before_queue)
    return Started(run_id=accepted["run"]["id"], conversation_id=conversation_id)


def _refuse_client_choices(prompt: Prompt, why: str) -> None:
    """A run whose graph is not built for this request cannot take the client's tools, format,
    sampling or tool turns: a 400 naming what was sent."""
    if prompt.image_parts:
        raise ApiProblem(400, "Bad Request", f"`{prompt.image_parts[0]}`: images cannot be taken here: {why}",
                         errors=[{"code": "unsupported_parameter", "message": why, "field": prompt.image_parts[0]}])
    client = prompt.client
    sampled = client.sampling.body() if client.sampling is not None else {}
    for param, given in (("tools", client.tools), ("tool_choice", client.tool_choice),
                         ("response_format", client.response_format),
                         ("temperature", client.temperature is not None),
                         ("max_tokens", client.max_tokens is not None), *((name, True) for name in sampled),
                         ("messages", prompt.carries_tool_turns or not prompt.text)):
        if given:
            what = "tool calls and results" if param == "messages" else f"`{param}`"
            raise ApiProblem(400, "Bad Request", f"{what} cannot be taken here: {why}",
                             errors=[{"code": "unsupported_parameter", "message": why, "field": param}])


def _graph(mode: Mode, prompt: Prompt) -> dict[str, Any]:
    """The chat mode's graph, its answering agent given the client's choices (docs/DSL.md)."""
    dsl = graph_for(mode)
    for node in dsl["nodes"]:
        if node["id"] == ANSWER_NODE:
            node["config"].update(prompt.client.agent_config())
    return dsl


async def _stateless(db: Database, bus: Bus, user: Principal, assistant: Assistant, prompt: Prompt,
                     grey: list[str], before_queue: BeforeQueue | None) -> Started:
    text, history = prompt.turns()
    task_input: dict[str, Any] = {"text": text}
    if assistant.workflow is not None:
        _refuse_client_choices(prompt, f"the workflow `{assistant.id}` has its own agents and tools; use a "
                                       "built-in model (agentix-react, agentix-direct).")
        if assistant.takes_history:
            task_input["history"] = prompt.history
        body = tasks.SubmitTask(workflow_id=assistant.workflow.id, input=task_input, options=TaskOptions())
    else:
        task_input["history"] = history
        body = tasks.SubmitTask(dsl=_graph(assistant.mode or "react", prompt), input=task_input,
                                options=TaskOptions())
    task, _, _ = await tasks.submit(db, bus, user, body, None, grey, before_queue)
    return Started(run_id=task.id, conversation_id=None)


async def start(db: Database, bus: Bus, user: Principal, assistant: Assistant, prompt: Prompt, wish: str | None,
                grey: list[str], before_queue: BeforeQueue | None = None) -> Started:
    """The run; `before_queue` runs before it is published, when it is at once (a conversation's
    run held behind others is published later, without it)."""
    if wish is None:
        return await _stateless(db, bus, user, assistant, prompt, grey, before_queue)
    if assistant.mode is None:
        raise _bad_header(f"A conversation runs the built-in chat agent (model agentix-<mode>); the workflow "
                          f"`{assistant.id}` answers stateless requests only.")
    _refuse_client_choices(prompt, "a conversation's runs answer its user's messages; send the request without "
                                   "the conversation headers (stateless) to use them.")
    conversation_id = wish
    if wish == NEW:
        conversation_id = await db.run(_open_conversation, user, assistant.mode, prompt)
    return await _post(db, bus, user, conversation_id, assistant.mode, prompt, grey, before_queue)
