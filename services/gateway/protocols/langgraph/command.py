"""A run's `command`, as LangGraph clients send it (`Command(resume, update, goto)`).

- `resume` answers the approval the thread waits for (runs.py); nothing else can happen in that
  turn, so `update` or `goto` with it is a 422 naming them.
- `update: {messages: [...]}` (or LangGraph's list of `[key, value]` pairs) adds the messages to
  the thread as update_state does (state_update.py: a turn of its own), before the run's
  question: the input's last human message, or with no input the update's last message, which
  must then be a human one (it is the run's question, not part of the update's turn).
- `goto` is the chat agent's answer node (what `GET /assistants/{id}/graph` draws for every
  mode: the model answers, as without `goto`) or `__end__`: no model call, the update (if any)
  is the run's own turn and the run ends at once, `success`.

Anything else is a 422 naming the field (docs/API.md, "LangGraph")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from sqlmodel import Session

from services.gateway.access.principal import Principal
from services.gateway.chat.modes import ANSWER_NODE
from services.gateway.chat.tables import ChatRun
from services.gateway.protocols.langgraph import state_update
from services.gateway.protocols.langgraph.assistant_graph import END
from services.gateway.protocols.langgraph.refusals import refused
from services.gateway.protocols.langgraph.run_request import RunCreate
from services.gateway.protocols.langgraph.state_update import Said
from services.gateway.triggers import deliveries
from shared.bus import Bus
from shared.bus.events import EventPublisher
from shared.contract.events import finish_task

KEYS: Final = ("resume", "update", "goto")
GOTO: Final = (ANSWER_NODE, END)
UPDATE_META: Final = {"source": "update"}  # an update's turn, as update_state's (history's metadata)


@dataclass(frozen=True)
class Asked:
    """What a run asks: the question's text and the id its client gave it, the messages said
    before it (added first, as a turn of their own), and the body field each id the client gave
    came in (a refusal of one names its field)."""

    text: str
    client_id: str | None = None
    before: list[Said] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)

    def field_of(self, message_id: str) -> str:
        return self.origin.get(message_id, "input.messages")


def from_field(said: list[Said], name: str) -> dict[str, str]:
    """The ids the client gave `said`, each with the body field they came in."""
    return {message_id: name for _, _, message_id in said if message_id}


@dataclass(frozen=True)
class Command:
    """What a run's `command` asks (nothing: a plain run on its input)."""

    resume: bool = False
    answer: Any = None  # `command.resume`
    said: list[Said] | None = None  # `command.update`'s messages
    end: bool = False  # `goto: "__end__"`: no model call

    def question(self, body: RunCreate) -> Asked | None:
        """With no input: the update's last message (a human one, `read` checked) as the run's
        question, and the messages before it as the update's turn. None: the input has it."""
        if body.input or not self.said:
            return None
        *turn, (_, text, message_id) = self.said
        return Asked(text, message_id, turn, from_field(self.said, "command.update.messages"))


def read(body: RunCreate) -> Command:
    """The body's command, checked before anything is written."""
    given = {k: v for k, v in (body.command or {}).items() if v is not None or k == "resume"}
    for key in given:
        if key not in KEYS:
            raise refused(f"command.{key}", f"a command has {' | '.join(f'`{k}`' for k in KEYS)}")
    if "resume" in given:
        for key in ("update", "goto"):
            if key in given:
                raise refused(f"command.{key}", "a resume answers the approval the thread waits for: "
                                                "nothing else can happen in that turn")
        return Command(resume=True, answer=given["resume"])
    goto = given.get("goto", ANSWER_NODE)
    if not isinstance(goto, str) or goto not in GOTO:
        raise refused("command.goto", f"a run goes to `{ANSWER_NODE}` (the model answers) or `{END}` (it ends at "
                                      "once, no model call): one node's name, not a list or a `Send`")
    said = _update(given["update"]) if "update" in given else None
    if goto == END:
        if body.input:
            raise refused("input", f"a run that goes to `{END}` calls no model, so nothing would answer its input: "
                                   "add the messages with `command.update`")
        return Command(said=said, end=True)
    if said is not None and not body.input and (said[-1][0] != "user" or not said[-1][1].strip()):
        raise refused("command.update", "a run needs a human message to answer: the input's, or the update's "
                                        f"last message (or `goto: \"{END}\"` to add the messages and run nothing)")
    return Command(said=said)


def _update(value: Any) -> list[Said]:
    """`{messages: …}`, or LangGraph's list of `[key, value]` pairs (the same key's values added
    in turn, as its `messages` reducer does)."""
    if isinstance(value, list):
        merged: dict[str, list[Any]] = {}
        for pair in value:
            if not isinstance(pair, list | tuple) or len(pair) != 2 or not isinstance(pair[0], str):
                raise refused("command.update", "an update is `{messages: [...]}` or a list of `[key, value]` pairs")
            key, item = pair
            merged.setdefault(key, []).extend(item if isinstance(item, list) else [item])
        value = merged
    return state_update.said_of(value, "command.update")


def add_update(session: Session, user: Principal, thread_id: str, said: list[Said], checkpoint: str | None) -> str:
    """What is said before the run's question (the update's messages, then the input's before its
    last) as a turn of its own; its checkpoint, which the run goes on from."""
    return state_update.add_turn(session, user, thread_id, said, checkpoint, dict(UPDATE_META), "command.update").id


def end_turn(session: Session, user: Principal, thread_id: str, said: list[Said], body: RunCreate,
             mode: str) -> ChatRun:
    """`goto: "__end__"`: the run is the update's turn (with no update, a turn that adds nothing),
    ended as it is written; its webhook is owed in the same transaction, as a run's is."""
    run = state_update.add_turn(session, user, thread_id, said, body.follows(),
                                {**body.run_metadata(), **UPDATE_META}, "command.update", mode)
    if body.webhook is not None:
        deliveries.owe(session, run.id, user.id, body.webhook, "lg")
    return run


async def ended(bus: Bus, run_id: str) -> None:
    """The ended run's log: its `done`, which its streams (and `wait`) close on, and which tells
    the conversation queue it ended (its webhook, if any, is then sent)."""
    await finish_task(EventPublisher(bus, run_id), run_id, "done")
