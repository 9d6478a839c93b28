"""`/lg` routes (thin): the LangGraph Agent Server API over conversations. See docs/API.md."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from services.gateway.access.principal import Principal
from services.gateway.db import Database
from services.gateway.deps import BusDep, DatabaseDep, MaybeBusDep
from services.gateway.pagination import MAX_OFFSET
from services.gateway.problems import ApiProblem
from services.gateway.protocols.langgraph import (
    command,
    history,
    runs,
    state_update,
    stateless,
    thread_search,
    threads,
)
from services.gateway.protocols.langgraph.auth import LgUser
from services.gateway.protocols.langgraph.guard import check_question
from services.gateway.protocols.langgraph.listing import json_response
from services.gateway.protocols.langgraph.refusals import known_query, refused
from services.gateway.protocols.langgraph.run_request import checkpoint_id_of
from services.gateway.protocols.langgraph.settled import settled
from services.gateway.protocols.langgraph.stream import FrameId, LgFrames, parse_id
from services.gateway.runs.stream import SSE_DOC, NewRunFeed, sse_response
from services.gateway.triggers.callbacks import check_webhook
from shared.bus import Bus

PREFIX = "/lg"
router = APIRouter(prefix=PREFIX, tags=["langgraph"], dependencies=[Depends(known_query)])
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)]
RESUMED_AFTER = 7  # a resumed run's stream: every frame up to its approval's, the opening excepted


def _links(thread_id: str, run_id: str, tail: str = "stream") -> dict[str, str]:
    # Relative to the API's root (`…/lg`), where the SDK resolves them.
    return {"Location": f"/threads/{thread_id}/runs/{run_id}/{tail}",
            "Content-Location": f"/threads/{thread_id}/runs/{run_id}"}


def _stream(request: Request, db: Database, bus: Bus, started: runs.Started, after: FrameId | None = None,
            on_end: Callable[[], None] | None = None,
            on_drop: Callable[[], None] | None = None) -> EventSourceResponse:
    run = started.run
    if after is None and started.opening_at:  # a resumed run streams on from its approval
        after = (started.opening_at, RESUMED_AFTER)
    translator = LgFrames(started.stream, after, started.opening_at)
    body = runs.frames(request.app.state, db, bus, started, translator)

    async def written() -> AsyncIterator[bytes]:
        try:
            async for chunk in body:
                yield chunk
        finally:
            if on_drop is not None and not translator.finished:
                on_drop()
            if on_end is not None:
                on_end()

    return sse_response(written(), _links(run.conversation_id, run.id))


async def _webhook_ok(request: Request, body: runs.RunCreate, field: str = "webhook") -> None:
    """A run's `webhook` refused (SSRF) before anything is written: a 422 naming the field."""
    await check_webhook(request.app.state.settings, body.webhook, field)


async def _start(request: Request, user: Principal, db: Database, bus: Bus | None, thread_id: str,
                 body: runs.RunCreate, new_feed: NewRunFeed | None = None) -> runs.Started:
    await _webhook_ok(request, body)
    started = await runs.start(db, bus, user, thread_id, body, lambda text: check_question(request, text),
                               new_feed.open if new_feed is not None else None)
    request.state.audit_target = f"thread_id={started.run.conversation_id},run_id={started.run.id}"
    return started


def _on_drop(db: Database, bus: Bus, user: Principal, body: runs.RunCreate,
             started: runs.Started) -> Callable[[], None] | None:
    return runs.cancel_when_dropped(db, bus, user, started.run) if body.on_disconnect == "cancel" else None


@router.post("/threads")
async def create_thread(body: threads.NewThread, request: Request, user: LgUser, db: DatabaseDep,
                        bus: MaybeBusDep) -> JSONResponse:
    thread_id, made = await db.run(threads.create_viewed, user, body)
    request.state.audit_target = f"thread_id={thread_id}"
    return json_response(made if made is not None else
                         await threads.current(db, bus, request.app.state.record_watch, user, thread_id))


@router.post("/threads/search")
async def search_threads(body: thread_search.ThreadSearch, user: LgUser, db: DatabaseDep) -> JSONResponse:
    return json_response(await db.run(thread_search.search, user, body))


@router.post("/threads/count")
async def count_threads(body: thread_search.ThreadFilter, user: LgUser, db: DatabaseDep) -> JSONResponse:
    return json_response(await db.run(thread_search.count, user, body))


@router.post("/threads/prune")
async def prune_threads(body: thread_search.Prune, user: LgUser, db: DatabaseDep, bus: MaybeBusDep) -> JSONResponse:
    pruned = 0
    for thread_id in dict.fromkeys(body.thread_ids):
        try:
            await runs.delete_thread(db, bus, user, thread_id)
        except ApiProblem as exc:
            if exc.status != 404:
                raise
            continue
        pruned += 1
    return json_response({"pruned_count": pruned})


@router.patch("/threads/{thread_id}")
async def update_thread(thread_id: str, body: thread_search.ThreadPatch, request: Request, user: LgUser,
                        db: DatabaseDep, bus: MaybeBusDep) -> JSONResponse:
    await db.run(thread_search.patch, user, thread_id, body)
    return json_response(await threads.current(db, bus, request.app.state.record_watch, user, thread_id))


@router.post("/threads/{thread_id}/copy")
async def copy_thread(thread_id: str, request: Request, user: LgUser, db: DatabaseDep,
                      bus: MaybeBusDep) -> JSONResponse:
    twin = await db.run(thread_search.copy, user, thread_id)
    request.state.audit_target = f"thread_id={twin.id}"
    return json_response(await threads.current(db, bus, request.app.state.record_watch, user, twin.id))


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: MaybeBusDep,
                     include: Annotated[list[str] | None, Query()] = None) -> JSONResponse:
    if include:
        raise refused("include", "a thread is given whole; it has no time to live (`ttl`) or other part to add")
    return json_response(await threads.current(db, bus, request.app.state.record_watch, user, thread_id))


async def _state_at(request: Request, user: Principal, db: Database, bus: Bus | None, thread_id: str,
                    checkpoint: Any) -> JSONResponse:
    interrupts = await threads.pending(db, bus, request.app.state.record_watch, user, thread_id)
    return json_response(await db.run(history.state_at, user, thread_id, interrupts, checkpoint_id_of(checkpoint)))


# What a state read asks in its query: `subgraphs` (the chat agent has none: the state is the same)
# and `select` (refused: every state carries all its fields).
Subgraphs = Annotated[bool, Query()]
Select = Annotated[list[str] | None, Query()]


def _all_fields(select: list[str] | None) -> None:
    if select:
        raise refused("select", "every state carries all its fields")


@router.get("/threads/{thread_id}/state")
async def thread_state(thread_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: MaybeBusDep,
                       subgraphs: Subgraphs = False, select: Select = None) -> JSONResponse:
    _all_fields(select)
    return await _state_at(request, user, db, bus, thread_id, None)


@router.post("/threads/{thread_id}/state")
async def update_thread_state(thread_id: str, body: state_update.StateUpdate, user: LgUser,
                              db: DatabaseDep, bus: MaybeBusDep) -> JSONResponse:
    answer = await db.run(state_update.update, user, thread_id, body)
    if bus is not None and bus.connected:  # the turn's log ends it too: a join of the thread's stream closes
        await command.ended(bus, answer["checkpoint"]["checkpoint_id"])
    return json_response(answer)


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def thread_state_at(thread_id: str, checkpoint_id: str, request: Request, user: LgUser, db: DatabaseDep,
                          bus: MaybeBusDep, subgraphs: Subgraphs = False, select: Select = None) -> JSONResponse:
    _all_fields(select)
    return await _state_at(request, user, db, bus, thread_id, checkpoint_id)


@router.post("/threads/{thread_id}/state/checkpoint")
async def thread_state_of(thread_id: str, body: history.StateQuery, request: Request, user: LgUser,
                          db: DatabaseDep, bus: MaybeBusDep) -> JSONResponse:
    return await _state_at(request, user, db, bus, thread_id, body.checkpoint)


async def _history(request: Request, user: Principal, db: Database, bus: Bus | None, thread_id: str,
                   query: history.HistoryQuery) -> JSONResponse:
    interrupts = await threads.pending(db, bus, request.app.state.record_watch, user, thread_id)
    return json_response(await db.run(history.states, user, thread_id, interrupts, query))


@router.post("/threads/{thread_id}/history")
async def thread_history(thread_id: str, body: history.HistoryQuery, request: Request, user: LgUser,
                         db: DatabaseDep, bus: MaybeBusDep) -> JSONResponse:
    return await _history(request, user, db, bus, thread_id, body)


@router.get("/threads/{thread_id}/history")
async def thread_history_get(thread_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: MaybeBusDep,
                             limit: Annotated[int, Query(ge=1, le=history.MAX_HISTORY)] = 10,
                             before: Annotated[str | None, Query(max_length=64)] = None) -> JSONResponse:
    return await _history(request, user, db, bus, thread_id, history.HistoryQuery(limit=limit, before=before))


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(thread_id: str, user: LgUser, db: DatabaseDep, bus: MaybeBusDep) -> Response:
    await runs.delete_thread(db, bus, user, thread_id)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs")
async def list_runs(thread_id: str, user: LgUser, db: DatabaseDep, limit: Annotated[int, Query(ge=1, le=1000)] = 10,
                    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                    status: Annotated[runs.RunStatus | None, Query()] = None,
                    select: Annotated[list[runs.RunField] | None, Query()] = None) -> JSONResponse:
    return json_response(await db.run(runs.list_runs, user, thread_id, limit, offset, status, select))


@router.post("/threads/{thread_id}/runs/stream", response_class=EventSourceResponse, responses=SSE_DOC)
async def stream_run(thread_id: str, body: runs.RunCreate, request: Request, user: LgUser, db: DatabaseDep,
                     bus: BusDep) -> EventSourceResponse:
    new_feed = NewRunFeed(request.app.state.run_feeds)  # the new run's events, live from the first
    try:
        started = await _start(request, user, db, bus, thread_id, body, new_feed)
        response = _stream(request, db, bus, started, on_drop=_on_drop(db, bus, user, body, started))
        new_feed.handed_over()
        return response
    finally:
        new_feed.release()


@router.post("/threads/{thread_id}/runs")
async def create_run(thread_id: str, body: runs.RunCreate, request: Request, user: LgUser, db: DatabaseDep,
                     bus: MaybeBusDep) -> JSONResponse:
    started = await _start(request, user, db, bus, thread_id, body)
    return json_response(await db.run(runs.view, started.run), headers=_links(thread_id, started.run.id))


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(thread_id: str, body: runs.RunCreate, request: Request, user: LgUser, db: DatabaseDep,
                   bus: BusDep) -> JSONResponse:
    started = await _start(request, user, db, bus, thread_id, body)
    state = await runs.wait(request.app.state, db, bus, started)
    return json_response(state, headers=_links(thread_id, started.run.id, "join"))


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(thread_id: str, run_id: str, request: Request, user: LgUser, db: DatabaseDep,
                  bus: MaybeBusDep) -> JSONResponse:
    await db.run(runs.load, user, thread_id, run_id)
    await settled(db, bus, request.app.state.record_watch, run_id)
    return json_response(await db.run(runs.get, user, thread_id, run_id))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(thread_id: str, run_id: str, user: LgUser, db: DatabaseDep) -> Response:
    await db.run(runs.remove_run, user, thread_id, run_id)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: BusDep,
                   cancel_on_disconnect: Annotated[bool, Query()] = False) -> JSONResponse:
    if cancel_on_disconnect:  # the JS SDK sends it, false unless asked
        raise refused("cancel_on_disconnect", "a join waits for the run and leaves it be; the stream join "
                                              "(`GET …/runs/{run_id}/stream`) cancels it when its reader leaves")
    joined = await db.run(runs.joined, user, thread_id, run_id, ["values"])
    return json_response(await runs.wait(request.app.state, db, bus, joined))


@router.get("/threads/{thread_id}/runs/{run_id}/stream", response_class=EventSourceResponse, responses=SSE_DOC)
async def join_stream(thread_id: str, run_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: BusDep,
                      stream_mode: Annotated[list[str] | None, Query()] = None,
                      cancel_on_disconnect: Annotated[bool, Query()] = False,
                      checkpoint_id: Annotated[str | None, Query(max_length=200)] = None,
                      namespace: Annotated[list[str] | None, Query()] = None,
                      last_event_id: LastEventId = None) -> EventSourceResponse:
    # `checkpoint_id` (useStream's rejoin sends the checkpoint it shows): a run streams from its own
    # log, whatever the client shows. `namespace`: the chat agent has no subgraphs to stream.
    if namespace:
        raise refused("namespace", "the chat agent has no subgraphs to stream")
    after = parse_id(last_event_id)
    asked = [m for m in stream_mode or () if m]  # the SDK sends an empty `stream_mode` when none is given
    joined = await db.run(runs.joined, user, thread_id, run_id, asked or list(runs.JOIN_MODES))
    return _stream(request, db, bus, joined, after,
                   on_drop=runs.cancel_when_dropped(db, bus, user, joined.run) if cancel_on_disconnect else None)


@router.get("/threads/{thread_id}/stream", response_class=EventSourceResponse, responses=SSE_DOC)
async def join_thread_stream(thread_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: BusDep,
                             stream_mode: Annotated[list[str] | None, Query()] = None,
                             last_event_id: LastEventId = None) -> EventSourceResponse:
    after = parse_id(last_event_id)
    run_id = await db.run(threads.run_to_join, user, thread_id, [m for m in stream_mode or () if m])
    return _stream(request, db, bus, await db.run(runs.joined, user, thread_id, run_id, list(runs.JOIN_MODES)),
                   after)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202)
async def cancel_run(thread_id: str, run_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: BusDep,
                     wait: Annotated[bool, Query()] = False,
                     action: Annotated[Literal["interrupt", "rollback"], Query()] = "interrupt",
                     reason: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    if reason:
        raise refused("reason", "a cancelled run is cancelled; no reason is recorded with it")
    await runs.cancel(db, bus, user, thread_id, run_id, action)
    if wait:
        await runs.wait(request.app.state, db, bus, await db.run(runs.joined, user, thread_id, run_id, ["values"]))
        return Response(status_code=204)
    return Response(status_code=202)


@router.post("/runs")
async def stateless_run(body: runs.RunCreate, request: Request, user: LgUser, db: DatabaseDep,
                        bus: BusDep) -> JSONResponse:
    await _webhook_ok(request, body)
    run = await stateless.start_background(request.app.state, db, bus, user, body,
                                           lambda text: check_question(request, text))
    return json_response(run, headers=_links(run["thread_id"], run["run_id"]))


@router.post("/runs/batch")
async def stateless_batch(body: Annotated[list[runs.RunCreate], Body(max_length=stateless.MAX_BATCH)],
                          request: Request, user: LgUser, db: DatabaseDep, bus: BusDep) -> JSONResponse:
    for i, one in enumerate(body):  # every run's target, command and input checked before any run starts
        await _webhook_ok(request, one, f"[{i}].webhook")
    stateless.check_bodies(body)
    return json_response([await stateless.start_background(request.app.state, db, bus, user, one,
                                                   lambda text: check_question(request, text)) for one in body])


@router.post("/runs/cancel", status_code=204)
async def cancel_runs(body: stateless.CancelMany, user: LgUser, db: DatabaseDep, bus: BusDep,
                      action: Annotated[Literal["interrupt", "rollback"], Query()] = "interrupt") -> Response:
    await stateless.cancel_many(db, bus, user, body, action)
    return Response(status_code=204)


@router.post("/runs/stream", response_class=EventSourceResponse, responses=SSE_DOC)
async def stateless_stream(body: runs.RunCreate, request: Request, user: LgUser, db: DatabaseDep,
                           bus: BusDep) -> EventSourceResponse:
    await _webhook_ok(request, body)
    new_feed = NewRunFeed(request.app.state.run_feeds)
    try:
        started, done = await runs.start_stateless(request.app.state, db, bus, user, body,
                                                   lambda text: check_question(request, text), new_feed.open)
        response = _stream(request, db, bus, started, on_end=done, on_drop=_on_drop(db, bus, user, body, started))
        new_feed.handed_over()
        return response
    finally:
        new_feed.release()


@router.post("/runs/wait")
async def stateless_wait(body: runs.RunCreate, request: Request, user: LgUser, db: DatabaseDep,
                         bus: BusDep) -> JSONResponse:
    await _webhook_ok(request, body)
    started, done = await runs.start_stateless(request.app.state, db, bus, user, body,
                                               lambda text: check_question(request, text))
    try:
        state = await runs.wait(request.app.state, db, bus, started)
    finally:
        done()
    return json_response(state, headers=_links(started.run.conversation_id, started.run.id, "join"))
