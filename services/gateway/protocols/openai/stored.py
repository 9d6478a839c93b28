"""A response after `POST /v1/responses`: `GET /v1/responses/{id}` (the response object, or with
`stream=true` its typed events again from the first, or after `starting_after`) and
`POST /v1/responses/{id}/cancel`, `DELETE /v1/responses/{id}`. A response is its run
(`resp_<run id>`), read from the run's event log like every stream of the run feed; another
user's is a 404 as an unknown one.

Deleting a response removes what it said and was given — the run's events, its input and output
— but not the task row's record of it (status, usage, cost: what the audit and the usage totals
count), which is marked so that the response is a 404 from then on. A response asked with
`store: false` is a 404 from the start and is emptied the same way once its run has ended."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, Final

from sqlmodel import Session, select

from services.gateway.access.principal import Principal
from services.gateway.chat.tables import ChatRun
from services.gateway.db import Database
from services.gateway.problems import ApiProblem
from services.gateway.protocols.openai.response_input import ResponseRequest
from services.gateway.protocols.openai.responses import ResponseFrames, whole
from services.gateway.protocols.openai.start import Started
from services.gateway.protocols.openai.translate import Translator
from services.gateway.runs import submit as tasks
from services.gateway.runs.views import current_task_view, load_owned
from services.gateway.tables import Task, TaskNode, aware
from shared.aio import spawn
from shared.bus import Bus
from shared.contract.task import TERMINAL

log = logging.getLogger("agentix.gateway.openai")
PREFIX: Final = "resp_"
DELETED: Final = "response_deleted"  # set in a task's `options` once its response is deleted
UNSTORED: Final = "response_unstored"  # set for a response asked with `store: false`: never read again
# A task's `options` key: the request's fields the response object repeats (`remember`).
ASKED: Final = "response_request"
# Another: where in the run's history its `instructions` are (they are the response's own: a
# response that continues it is not given them, and its input items do not list them).
INSTRUCTIONS_AT: Final = "instructions_at"
_NOT_REPEATED: Final = frozenset({"input", "stream", "stream_options"})


def _run_id(response_id: str) -> str:
    if not response_id.startswith(PREFIX) or len(response_id) == len(PREFIX):
        raise ApiProblem(404, "Not Found", f"No response `{response_id}`.", type_="not_found")
    return response_id[len(PREFIX):]


def _task(session: Session, user: Principal, run_id: str) -> Task:
    """The response's task (404 for another user's, an unknown or a deleted one)."""
    missing = ApiProblem(404, "Not Found", f"No response `{PREFIX}{run_id}`.", type_="not_found")
    try:
        task = load_owned(session, user, run_id)
    except ApiProblem as exc:
        raise missing from exc
    if (task.options or {}).get(DELETED) or (task.options or {}).get(UNSTORED):
        raise missing
    return task


def _turns_given(session: Session, user: Principal, run_id: str) -> list[dict[str, Any]]:
    """The chat-format turns a run was given, its instructions left out: its history, then the
    user's words (none when the last turns were tool results)."""
    task = _task(session, user, run_id)
    given = dict(task.input or {})
    history = given.get("history") or []
    instructions_at = (task.options or {}).get(INSTRUCTIONS_AT)
    turns = [t for at, t in enumerate(history) if isinstance(t, dict) and at != instructions_at]
    text = str(given.get("text") or "")
    return [*turns, {"role": "user", "content": text}] if text else turns


def _items_of(turn: dict[str, Any], run_id: str, index: int) -> list[dict[str, Any]]:
    """One chat-format turn as the Responses API's items."""
    if turn.get("role") == "tool":
        return [{"type": "function_call_output", "id": f"fco_{run_id}_{index}", "status": "completed",
                 "call_id": str(turn.get("tool_call_id")), "output": str(turn.get("content") or "")}]
    items: list[dict[str, Any]] = []
    content = turn.get("content")
    if content:
        parts = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
        items.append({"type": "message", "id": f"msg_{run_id}_{index}", "status": "completed",
                      "role": str(turn.get("role")), "content": [_part(p) for p in parts]})
    for call in turn.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append({"type": "function_call", "id": f"fc_{call.get('id')}", "status": "completed",
                      "call_id": call.get("id"), "name": function.get("name"), "arguments": function.get("arguments")})
    return items


def _part(part: dict[str, Any]) -> dict[str, Any]:
    """A content part the model was given, as the Responses API's input part."""
    if part.get("type") == "image_url":
        image = part.get("image_url") or {}
        return {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail") or "auto"}
    return {"type": "input_text", "text": str(part.get("text") or "")}


async def input_items(db: Database, user: Principal, response_id: str, order: str, limit: int = 20,
                      after: str | None = None) -> dict[str, Any]:
    """The items the response's run was given (the earlier turns, then the user's), as
    `input_items` lists them: newest first unless `order=asc`, `limit` at a time, after the item
    `after` (the last one of the page before)."""
    run_id = _run_id(response_id)
    given = await db.run(_turns_given, user, run_id)
    items = [item for index, turn in enumerate(given) for item in _items_of(turn, run_id, index)]
    if order != "asc":
        items.reverse()
    if after is not None:
        at = next((n for n, item in enumerate(items) if item["id"] == after), None)
        if at is None:
            raise ApiProblem(400, "Bad Request", f"`after`: the response has no input item `{after}`.",
                             errors=[{"code": "invalid_value", "message": "no such item", "field": "after"}])
        items = items[at + 1:]
    page = items[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(items) > limit}


async def previous_turns(state: Any, db: Database, bus: Bus, user: Principal, response_id: str) -> list[dict[str, Any]]:
    """`previous_response_id`: the turns that response's run was given and its answer (its text,
    or the client tool calls it ended with), to go before the new input. Each run keeps all the
    turns it was given, so a chain of any length is one read. A response still going is waited
    for; one that failed cannot be continued (400)."""
    run_id = _run_id(response_id)
    given = await db.run(_turns_given, user, run_id)
    frames, live = await frames_of(db, user, response_id, False)
    answered = await whole(state, bus, frames, live)
    if answered["status"] not in ("completed", "incomplete"):
        raise ApiProblem(400, "Bad Request", f"The response `{response_id}` ended {answered['status']}: it cannot "
                                             "be continued.",
                         errors=[{"code": "invalid_value", "message": "previous response",
                                  "field": "previous_response_id"}])
    translator = frames.translator
    said: dict[str, Any] = {"role": "assistant", "content": translator.text or None}
    if translator.tool_calls:
        said["tool_calls"] = translator.tool_calls
    return [*given, said]


def remember(session: Session, run_id: str, body: ResponseRequest, instructions_at: int | None = None) -> int | None:
    """Keep with the run's task what the response object repeats of its request (`model`,
    `instructions`, `metadata`, `background`, the tools and sampling…), so that `GET
    /v1/responses/{id}` answers the object `POST` did, and where its instructions are in its
    history (`Prompt.instructions_at`); the task's creation time, the object's `created_at`. A
    conversation's run held behind another has no task yet (and is no response to read until it
    starts): it keeps nothing (None)."""
    task = session.get(Task, run_id)
    if task is None:
        return None
    asked = body.model_dump(mode="json", exclude=set(_NOT_REPEATED), exclude_none=True)
    task.options = {**(task.options or {}), ASKED: asked,
                    **({INSTRUCTIONS_AT: instructions_at} if instructions_at is not None else {}),
                    **({UNSTORED: True} if isinstance(body, ResponseRequest) and body.store is False else {})}
    session.add(task)
    return _created_at(task)


def _created_at(task: Task) -> int:
    created = aware(task.created_at)
    return int(created.timestamp()) if created else 0


def _owned(session: Session, user: Principal, run_id: str) -> tuple[str, str | None]:
    task = _task(session, user, run_id)
    return task.status, task.workflow_id


def _asked(session: Session, user: Principal, run_id: str) -> tuple[Task, ResponseRequest, int]:
    """The response's task, the request it answered (as far as the object repeats it) and when."""
    task = _task(session, user, run_id)
    asked = dict((task.options or {}).get(ASKED) or {})
    asked.setdefault("model", task.workflow_id or "agentix")
    return task, ResponseRequest(input="", **asked), _created_at(task)


async def frames_of(db: Database, user: Principal, response_id: str, streamed: bool,
                    starting_after: int | None = None) -> tuple[ResponseFrames, bool]:
    """The response's translator, and whether its run is still going (read live)."""
    run_id = _run_id(response_id)
    task, body, created_at = await db.run(_asked, user, run_id)
    frames = ResponseFrames(Translator.for_mode(Started(run_id=run_id, conversation_id=None), None),
                            body.model, body, streamed=streamed,
                            starting_after=-1 if starting_after is None else starting_after,
                            created_at=created_at)
    return frames, task.status not in TERMINAL


async def cancel(db: Database, bus: Bus, user: Principal, response_id: str) -> None:
    """Cancel the response's run (409 when it has ended)."""
    run_id = _run_id(response_id)
    await db.run(_owned, user, run_id)
    await tasks.cancel(db, bus, user, run_id)


def _forget(session: Session, user: Principal, run_id: str) -> None:
    """Empty the response's task of what it was given and answered, and mark it deleted. A run
    still going is a 409 (cancel it first); a conversation's run is its conversation's, deleted
    with it (404 here, as it is no response)."""
    task = _task(session, user, run_id)
    if session.get(ChatRun, run_id) is not None:
        raise ApiProblem(404, "Not Found", f"No response `{PREFIX}{run_id}`: it is a conversation's run.",
                         type_="not_found")
    if task.status not in TERMINAL:
        raise ApiProblem(409, "Conflict", f"The response `{PREFIX}{run_id}` is still going: cancel it first.")
    _empty(session, task)


def _empty(session: Session, task: Task) -> None:
    task.input, task.output = {}, None
    task.options = {**(task.options or {}), DELETED: True}
    session.add(task)
    for node in session.exec(select(TaskNode).where(TaskNode.task_id == task.id)):
        node.output_preview = None
        session.add(node)


def _empty_unstored(session: Session, run_id: str) -> None:
    task = session.get(Task, run_id)
    if task is not None:
        _empty(session, task)


async def delete(state: Any, db: Database, bus: Bus, user: Principal, response_id: str) -> dict[str, Any]:
    """`DELETE /v1/responses/{id}`: OpenAI's `response.deleted` object. The record is read once
    it has caught up with the run's log (a response just answered may not be recorded ended yet)."""
    run_id = _run_id(response_id)
    await db.run(_owned, user, run_id)
    await current_task_view(db, bus, state.record_watch, user, run_id)
    await db.run(_forget, user, run_id)
    await _purge(bus, run_id)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


async def _purge(bus: Bus, run_id: str) -> None:
    """The run's events hold its answer (and its input, in the task's first event): gone too."""
    await bus.js.purge_stream(bus.names.events_stream, subject=bus.subjects.events_all(run_id))


async def forget(state: Any, db: Database, bus: Bus, user: Principal, run_id: str) -> None:
    """`store: false`, once its run has ended: what the response was given and said is removed,
    as `DELETE` removes it (the record is read once it has caught up with the run's log, so the
    recorder writes nothing back after). A failure leaves them, never served (`UNSTORED`): the
    answer the client is owed still goes out."""
    try:
        await current_task_view(db, bus, state.record_watch, user, run_id)
        await db.run(_empty_unstored, run_id)
        await _purge(bus, run_id)
    except Exception as exc:  # the bus or the database went away
        log.warning("response %s%s not emptied: %s", PREFIX, run_id, exc)


async def forgotten_after(events: AsyncIterator[bytes], state: Any, db: Database, bus: Bus, user: Principal,
                          frames: ResponseFrames) -> AsyncIterator[bytes]:
    """A stream of a response not stored: it is forgotten before its last event goes out (a client
    that has that event finds it gone), or, when its client left before, once its run has ended."""
    run_id = frames.translator.started.run_id
    forgotten = False
    try:
        async for body in events:
            if frames.translator.ending is not None and not forgotten:
                forgotten = True
                await forget(state, db, bus, user, run_id)
            yield body
    finally:
        if not forgotten:
            spawn(_forget_once_ended(state, db, bus, user, run_id, frames), f"response-forget-{run_id}")


async def _forget_once_ended(state: Any, db: Database, bus: Bus, user: Principal, run_id: str,
                             frames: ResponseFrames) -> None:
    if frames.translator.ending is None:  # followed to its end from the log's start, folded
        following = ResponseFrames(Translator.for_mode(Started(run_id=run_id, conversation_id=None), None),
                                   frames.model, frames.body, streamed=False)
        await whole(state, bus, following)  # never raises: a broken read ends it as failed
    await forget(state, db, bus, user, run_id)
