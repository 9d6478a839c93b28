"""`/v1`: the OpenAI-compatible routes (thin). See docs/API.md, "OpenAI-compatible API"."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from services.gateway.chat import conversations
from services.gateway.deps import BusDep, DatabaseDep
from services.gateway.protocols.openai import (
    assistants,
    embeddings,
    params,
    response_input,
    responses,
    start,
    stored,
    stream,
    vision,
)
from services.gateway.protocols.openai.access import Caller, guard
from services.gateway.protocols.openai.errors import OpenAIRoute
from services.gateway.protocols.openai.request import ChatCompletionRequest, prompt_of, refuse_unsupported
from services.gateway.protocols.openai.translate import Translator
from services.gateway.protocols.openai.wire import Head
from services.gateway.runs.stream import NewRunFeed, sse_response

# Not in /openapi.json, whose errors are problem+json: OpenAI's API reference describes these.
router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIRoute, include_in_schema=False,
                   dependencies=[Depends(params.known_query)])

ConversationId = Annotated[str | None, Header(alias=start.CONVERSATION_ID, max_length=64)]
ConversationWish = Annotated[str | None, Header(alias=start.CONVERSATION, max_length=16)]


@router.get("/models")
async def list_models(user: Caller, db: DatabaseDep) -> dict[str, Any]:
    found = await db.run(assistants.listing, user)
    return {"object": "list", "data": [a.model_object() for a in found]}


@router.get("/models/{model}")
async def get_model(model: str, user: Caller, db: DatabaseDep) -> dict[str, Any]:
    return (await db.run(assistants.resolve, user, model)).model_object()


@router.post("/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionRequest, request: Request, user: Caller, db: DatabaseDep,
                           bus: BusDep, conversation_id: ConversationId = None,
                           conversation: ConversationWish = None) -> JSONResponse | EventSourceResponse:
    wish = start.conversation_wish(conversation_id, conversation)
    refuse_unsupported(body)
    prompt = prompt_of(body)
    assistant = await db.run(assistants.resolve, user, body.model)
    await vision.check_images(db, request.app.state.settings, prompt)
    # A conversation's run reads only the new message: the sent history goes nowhere then.
    grey = await guard(request, prompt.strings() if wish in (None, start.NEW) else [prompt.text])
    # A streamed answer reads its run's events live from the first, with no consumer of its own.
    new_feed = NewRunFeed(request.app.state.run_feeds if body.stream else None)
    try:
        started = await start.start(db, bus, user, assistant, prompt, wish, grey, new_feed.open)
        await db.run(stored.remember, started.run_id, body)
        request.state.audit_target = f"run_id={started.run_id}"
        headers = {"X-Agentix-Run-Id": started.run_id}
        if started.conversation_id:
            headers[start.CONVERSATION_ID] = started.conversation_id
        head = Head(id=f"chatcmpl-{started.run_id}", created=int(time.time()), model=body.model)
        translator = Translator.for_mode(started, assistant.mode)
        if not body.stream:
            return JSONResponse(await stream.whole(request.app.state, bus, head, translator), headers=headers)
        chunks = stream.event_stream(request.app.state, db, bus, user, head, translator, body.include_usage)
        response = sse_response(chunks, headers, ping_s=stream.PING_S)
        new_feed.handed_over()
        return response
    finally:
        new_feed.release()


@router.post("/embeddings")
async def create_embeddings(body: embeddings.EmbeddingRequest, user: Caller, bus: BusDep) -> dict[str, Any]:
    return await embeddings.embeddings(bus, user, body)


@router.post("/responses", response_model=None)
async def create_response(body: response_input.ResponseRequest, request: Request, user: Caller, db: DatabaseDep,
                          bus: BusDep) -> JSONResponse | EventSourceResponse:
    response_input.prompt_of(body)  # a bad request is refused before the previous response is read
    earlier = (await stored.previous_turns(request.app.state, db, bus, user, body.previous_response_id)
               if body.previous_response_id else None)
    prompt = response_input.prompt_of(body, earlier)
    assistant = await db.run(assistants.resolve, user, body.model)
    await vision.check_images(db, request.app.state.settings, prompt)
    wish = body.conversation_id
    if wish == start.NEW:
        raise conversations.not_found(wish)  # `new` is the chat header's wish, never an id here
    # A conversation's run reads only the new message.
    grey = await guard(request, prompt.strings() if wish is None else [prompt.text])
    new_feed = NewRunFeed(request.app.state.run_feeds if body.stream else None)
    try:
        started = await start.start(db, bus, user, assistant, prompt, wish, grey, new_feed.open)
        created_at = await db.run(stored.remember, started.run_id, body, prompt.instructions_at)
        request.state.audit_target = f"run_id={started.run_id}"
        headers = {"X-Agentix-Run-Id": started.run_id}
        frames = responses.ResponseFrames(Translator.for_mode(started, assistant.mode), body.model, body,
                                          streamed=body.stream)
        if created_at is not None:
            frames.created_at = created_at  # as `GET /v1/responses/{id}` will say it
        if body.background and not body.stream:  # answered at once: the run goes on, read by GET
            return JSONResponse(frames.response("queued"), headers=headers)
        if not body.stream:
            answered = await responses.whole(request.app.state, bus, frames)
            if body.store is False:
                await stored.forget(request.app.state, db, bus, user, started.run_id)
            return JSONResponse(answered, headers=headers)
        # A background run, or a conversation's, is not the stream's: leaving the stream leaves it be.
        owner = not body.background and started.conversation_id is None
        events = responses.streamed(request.app.state, db, bus, user, frames, owner=owner)
        if body.store is False:
            events = stored.forgotten_after(events, request.app.state, db, bus, user, frames)
        response = sse_response(events, headers, ping_s=stream.PING_S)
        new_feed.handed_over()
        return response
    finally:
        new_feed.release()


async def _nothing_more(include: Annotated[list[str] | None, Query()] = None,
                        include_listed: Annotated[list[str] | None, Query(alias="include[]")] = None) -> None:
    """`include` (`include[]=…` as the openai SDK lists it) asks for more than a response or its
    items carry here (logprobs, encrypted reasoning, search results…): refused by name."""
    if include or include_listed:
        raise params.unsupported("include", "a response is given with what it has; nothing more is kept to add.")


NothingMore = Annotated[None, Depends(_nothing_more)]


@router.get("/responses/{response_id}", response_model=None)
async def get_response(response_id: str, request: Request, user: Caller, db: DatabaseDep, bus: BusDep,
                       stream_: Annotated[bool, Query(alias="stream")] = False,
                       starting_after: Annotated[int | None, Query(ge=-1)] = None,
                       _: NothingMore = None, include_obfuscation: Annotated[bool, Query()] = True,
                       ) -> dict[str, Any] | EventSourceResponse:
    # `include_obfuscation` is a no-op, as at creation (`stream_options.include_obfuscation`).
    frames, live = await stored.frames_of(db, user, response_id, stream_, starting_after)
    if not stream_:
        return await responses.now(request.app.state, bus, frames)
    events = responses.streamed(request.app.state, db, bus, user, frames, live, owner=False)
    return sse_response(events, {"X-Agentix-Run-Id": frames.translator.started.run_id}, ping_s=stream.PING_S)


@router.post("/responses/{response_id}/cancel")
async def cancel_response(response_id: str, request: Request, user: Caller, db: DatabaseDep,
                          bus: BusDep) -> dict[str, Any]:
    await stored.cancel(db, bus, user, response_id)
    frames, live = await stored.frames_of(db, user, response_id, False)
    return await responses.whole(request.app.state, bus, frames, live)


@router.delete("/responses/{response_id}")
async def delete_response(response_id: str, request: Request, user: Caller, db: DatabaseDep,
                          bus: BusDep) -> dict[str, Any]:
    return await stored.delete(request.app.state, db, bus, user, response_id)


@router.get("/responses/{response_id}/input_items")
async def response_input_items(response_id: str, user: Caller, db: DatabaseDep,
                               order: Annotated[Literal["asc", "desc"], Query()] = "desc",
                               limit: Annotated[int, Query(ge=1, le=100)] = 20,
                               after: Annotated[str | None, Query(max_length=200)] = None,
                               _: NothingMore = None) -> dict[str, Any]:
    return await stored.input_items(db, user, response_id, order, limit, after)
