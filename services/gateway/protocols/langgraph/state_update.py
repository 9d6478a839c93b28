"""`POST /threads/{id}/state` (update_state): messages added to the thread as a turn of their own,
a new checkpoint (a run that ran nothing, ended at once, `metadata.source: "update"`), which the
next run's model reads as the conversation so far. On an older checkpoint it starts a branch
(the turns after that checkpoint stay on theirs: chat/lineage.py). A message the branch already
has (by id) said again as it is is left out, as LangGraph's `add_messages` keeps it; said with
other content (an edit in place) it is a 422: the turns are kept as they were said. A run's
`command.update` and input add their messages the same way (`said_of`, `new_said`, `add_turn`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, col, select

from services.gateway.access.principal import Principal
from services.gateway.chat import lineage
from services.gateway.chat import messages as chat_messages
from services.gateway.chat.queue import branch_point, going
from services.gateway.chat.tables import ChatMessage, ChatRun
from services.gateway.ids import new_id
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import checkpoints, messages, threads
from services.gateway.protocols.langgraph.refusals import refused
from services.gateway.protocols.langgraph.run_request import checkpoint_id_of
from services.gateway.tables import now


class StateUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = Field(default=None, max_length=200)
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = Field(default=None, max_length=64)


Said = tuple[str, str, str | None]  # a message to add: role (user | assistant), text, the client's id
MAX_ID = 64  # `ChatMessage.client_id`


def said_of(values: Any, field: str) -> list[Said]:
    """The messages `values` adds (`{messages: [...]}`, or one message), checked; `field` is the
    body field they came in (`values`, or a run's `command.update`), which a refusal names."""
    if not isinstance(values, dict):
        raise refused(field, "a thread's state is `{messages}`: add messages")
    for key in values:
        if key != "messages":
            raise refused(f"{field}.{key}", "a thread's state is `{messages}`: add messages")
    said = values.get("messages") or []
    said = [said] if isinstance(said, dict | str) else said
    out = []
    for given in said if isinstance(said, list) else [said]:
        message = _as_message(given)
        if message is None:
            raise refused(f"{field}.messages", "each message is `{role|type, content, id?}`, a `[role, content]` "
                                               "pair or a string (a human message)")
        kind = message.get("type", message.get("role"))
        role = "user" if kind in ("human", "user") else "assistant" if kind in ("ai", "assistant") else None
        if role is None:
            raise refused(f"{field}.messages",
                          f"a {kind!r} message is not supported (human and ai messages are kept)")
        out.append((role, messages.text_of(message.get("content"), f"{field}.messages"),
                    client_id(message, f"{field}.messages")))
    if not out:
        raise refused(field, "nothing to add")
    ids = [i for _, _, i in out if i]
    if len(set(ids)) < len(ids):
        raise refused(f"{field}.messages", "two messages have one `id`")
    return out


def _as_message(given: Any) -> dict[str, Any] | None:
    """A message in any form LangChain takes one (`convert_to_messages`): a dict, a `[role,
    content]` pair (a Python client's tuple, sent as a list) or a string (a human message)."""
    if isinstance(given, dict):
        return given
    if isinstance(given, str):
        return {"type": "human", "content": given}
    if isinstance(given, list) and len(given) == 2 and isinstance(given[0], str):
        return {"type": given[0], "content": given[1]}
    return None


def client_id(message: dict[str, Any], field: str) -> str | None:
    """The id a client gave a message (None: the thread gives it one), checked."""
    given = message.get("id")
    if given is not None and (not isinstance(given, str) or not 0 < len(given) <= MAX_ID):
        raise refused(field, f"a message's `id` is a string of 1–{MAX_ID} characters")
    return given


def new_said(session: Session, thread_id: str, said: list[Said], field_of: Callable[[str], str],
             follows: str | None) -> list[Said]:
    """`said` less what the branch it goes on (the turns up to checkpoint `follows`, None: the
    latest) already has, as LangGraph's `add_messages` keeps a message its state has by id: a
    message said again as it is (a client that sends the whole conversation each turn, as
    `RemoteGraph` in a graph of its own does) is left out; one said with other content is an
    edit, refused naming its field (`field_of(id)`): the turns are kept as they were said."""
    ids = [i for _, _, i in said if i]
    if not ids:
        return said  # nothing the thread could have (the usual run: no lineage to read)
    order, parent = lineage.links(session, thread_id)
    branch = lineage.branch_of(parent, follows or (order[-1] if order else None))
    had = _known(session, thread_id, branch, ids)
    out = []
    for role, text, message_id in said:
        if message_id is None or message_id not in had:
            out.append((role, text, message_id))
        elif had[message_id] != (role, text):
            raise refused(field_of(message_id), "editing a message the thread has is not supported (turns are kept "
                                                "as said: add the edited message, without its id, on the checkpoint "
                                                "before it)")
    return out


def _known(session: Session, thread_id: str, branch: list[str], ids: list[str]) -> dict[str, tuple[str, str]]:
    """The messages of the turns `branch` that clients know by one of `ids` (`messages.from_row`:
    the id a client gave, the row's own, or an answer's `run-<run id>`), as (role, text)."""
    runs = [run for run in map(messages.run_of_answer, ids) if run is not None]
    maybe = col(ChatMessage.client_id).in_(ids) | col(ChatMessage.id).in_(ids) | col(ChatMessage.run_id).in_(runs)
    on_branch = col(ChatMessage.run_id).in_(branch) | col(ChatMessage.run_id).is_(None)  # None: said before any run
    found: dict[str, tuple[str, str]] = {}
    for row in session.exec(select(ChatMessage).where(ChatMessage.conversation_id == thread_id, maybe, on_branch)):
        seen_as = messages.from_row(row)["id"]
        if seen_as in ids:
            found[seen_as] = (row.role, row.content)
    return found


def add_turn(session: Session, user: Principal, thread_id: str, said: list[Said], checkpoint: str | None,
             meta: dict[str, Any], field: str, mode: str | None = None) -> ChatRun:
    """`said` as a turn of its own: a run that ran nothing, ended at once, on the thread's latest
    checkpoint or on `checkpoint` (an older one starts a branch). Refused while a run goes, and
    for a message id the thread has (`field` names where the messages came from)."""
    conversation = threads.load(session, user, thread_id)
    if checkpoints.question_run(checkpoint) is not None:
        raise refused("checkpoint", "messages are added on a turn's own checkpoint; a question's is where its "
                                    "answer is made again (a run from it with no input)")
    if going(session, thread_id):
        raise ApiProblem(409, "Conflict", f"Thread {thread_id} has a run going: add messages once it has ended.")
    said = new_said(session, thread_id, said, lambda _: f"{field}.messages", checkpoint)
    try:
        seq, follows = branch_point(session, thread_id, checkpoint)
    except ApiProblem as exc:
        if exc.status == 404:
            raise checkpoints.not_found(thread_id, checkpoint or "") from exc
        raise
    run = ChatRun(id=new_id("t"), conversation_id=thread_id, seq=seq, mode=mode or conversation.mode,
                  state="succeeded", ended_at=now(), follows=follows, meta=meta)
    session.add(run)
    for role, text, message_id in said:
        message = chat_messages.add(session, thread_id, run.id, seq, role, text)
        # Without the client's, the row's own: the turn's messages are distinct, answers included.
        message.client_id = message_id or message.id
    conversation.last_activity_at = now()
    session.add(conversation)
    session.flush()
    return run


def update(session: Session, user: Principal, thread_id: str, body: StateUpdate) -> dict[str, Any]:
    meta = {"source": "update", "as_node": body.as_node} if body.as_node else {"source": "update"}
    run = add_turn(session, user, thread_id, said_of(body.values, "values"),
                   checkpoint_id_of(body.checkpoint) or body.checkpoint_id, meta, "values")
    return {"checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": run.id,
                           "checkpoint_map": None}}
