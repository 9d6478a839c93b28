"""`/lg` assistant routes (thin), and the probes the SDK and Studio send first (`/ok`, `/info`).
See docs/API.md, "LangGraph"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from services.gateway.deps import DatabaseDep
from services.gateway.protocols.langgraph import assistant_store, assistants
from services.gateway.protocols.langgraph.auth import LgUser
from services.gateway.protocols.langgraph.listing import json_response, page_response
from services.gateway.protocols.langgraph.refusals import known_query, refused
from services.gateway.protocols.langgraph.routes import PREFIX
from shared.settings import VERSION

router = APIRouter(prefix=PREFIX, tags=["langgraph"], dependencies=[Depends(known_query)])


@router.get("/ok")
async def ok() -> dict[str, bool]:
    return {"ok": True}


@router.get("/info")
async def info() -> dict[str, Any]:
    """What this server is and which optional parts of the API it has (as `langgraph-api` says it)."""
    return {"version": VERSION, "server": "agentix", "langgraph_py_version": None,
            "flags": {"assistants": True, "crons": True, "langsmith": False, "langsmith_tracing_replicas": False,
                      "store": True, "threads": True, "runs": True},
            "host": {"kind": "self-hosted", "project_id": None, "host_revision_id": None, "revision_id": None,
                     "tenant_id": None}}


@router.post("/assistants")
async def create_assistant(body: assistant_store.AssistantIn, request: Request, user: LgUser,
                           db: DatabaseDep) -> JSONResponse:
    made = await db.run(assistants.create, user, body)
    request.state.audit_target = f"assistant_id={made['assistant_id']}"
    return json_response(made)


@router.post("/assistants/search")
async def search_assistants(body: assistants.AssistantSearch, user: LgUser, db: DatabaseDep) -> JSONResponse:
    page, next_offset = await db.run(assistants.search, user, body)
    return page_response(page, next_offset)


@router.post("/assistants/count")
async def count_assistants(body: assistants.AssistantCount, user: LgUser, db: DatabaseDep) -> int:
    return await db.run(assistants.count, user, body)


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str, user: LgUser, db: DatabaseDep) -> JSONResponse:
    return json_response(await db.run(assistants.get, user, assistant_id))


@router.patch("/assistants/{assistant_id}")
async def update_assistant(assistant_id: str, body: assistant_store.AssistantPatch, request: Request, user: LgUser,
                           db: DatabaseDep) -> JSONResponse:
    request.state.audit_target = f"assistant_id={assistant_id}"
    return json_response(await db.run(assistants.update, user, assistant_id, body))


@router.delete("/assistants/{assistant_id}", status_code=204)
async def delete_assistant(assistant_id: str, request: Request, user: LgUser, db: DatabaseDep,
                           delete_threads: Annotated[bool, Query()] = False) -> Response:
    request.state.audit_target = f"assistant_id={assistant_id}"
    if delete_threads:
        raise refused("delete_threads", "a thread is not tied to an assistant here (any of them may "
                                                        "run on it); delete threads with DELETE /threads/{id}")
    await db.run(assistants.delete, user, assistant_id)
    return Response(status_code=204)


@router.get("/assistants/{assistant_id}/graph")
async def assistant_graph(assistant_id: str, user: LgUser, db: DatabaseDep,
                          xray: Annotated[str, Query(max_length=8)] = "false") -> JSONResponse:
    depth: bool | int = xray.lower() == "true" or (xray.isdigit() and int(xray) > 0)
    return json_response(await db.run(assistants.graph, user, assistant_id, depth))


@router.get("/assistants/{assistant_id}/schemas")
async def assistant_schemas(assistant_id: str, user: LgUser, db: DatabaseDep) -> JSONResponse:
    return json_response(await db.run(assistants.schemas, user, assistant_id))


# `recurse`: the subgraphs' own subgraphs too; an assistant's graph has none at any depth.
Recurse = Annotated[bool, Query()]


@router.get("/assistants/{assistant_id}/subgraphs")
async def assistant_subgraphs(assistant_id: str, user: LgUser, db: DatabaseDep,
                              recurse: Recurse = False) -> JSONResponse:
    return json_response(await db.run(assistants.subgraphs, user, assistant_id))


@router.get("/assistants/{assistant_id}/subgraphs/{namespace}")
async def assistant_subgraph(assistant_id: str, namespace: str, user: LgUser, db: DatabaseDep,
                             recurse: Recurse = False) -> JSONResponse:
    return json_response(await db.run(assistants.subgraphs, user, assistant_id))


@router.post("/assistants/{assistant_id}/versions")
async def assistant_versions(assistant_id: str, body: assistants.VersionSearch, user: LgUser,
                             db: DatabaseDep) -> JSONResponse:
    return json_response(await db.run(assistants.versions, user, assistant_id, body))


@router.post("/assistants/{assistant_id}/latest")
async def assistant_latest(assistant_id: str, body: assistants.Latest, request: Request, user: LgUser,
                           db: DatabaseDep) -> JSONResponse:
    request.state.audit_target = f"assistant_id={assistant_id}"
    return json_response(await db.run(assistants.set_latest, user, assistant_id, body.version))
