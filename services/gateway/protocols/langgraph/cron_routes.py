"""`/lg` cron routes (thin): LangGraph crons over Agentix schedules (`crons`). See docs/API.md,
"LangGraph"."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from services.gateway.deps import BusDep, DatabaseDep
from services.gateway.protocols.langgraph import crons
from services.gateway.protocols.langgraph.auth import LgUser
from services.gateway.protocols.langgraph.listing import json_response, page_response
from services.gateway.protocols.langgraph.refusals import known_query
from services.gateway.protocols.langgraph.routes import PREFIX

router = APIRouter(prefix=PREFIX, tags=["langgraph"], dependencies=[Depends(known_query)])


@router.post("/runs/crons")
async def create_cron(body: crons.CronCreate, request: Request, user: LgUser, db: DatabaseDep,
                      bus: BusDep) -> JSONResponse:
    made = await crons.create(db, bus, user, body)
    request.state.audit_target = f"cron_id={made['cron_id']}"
    return json_response(made)


@router.post("/threads/{thread_id}/runs/crons")
async def create_thread_cron(thread_id: str, body: crons.CronCreate, user: LgUser) -> JSONResponse:
    raise crons.refuse_thread()


@router.post("/runs/crons/search")
async def search_crons(body: crons.CronSearch, user: LgUser, db: DatabaseDep) -> JSONResponse:
    page, next_offset = await db.run(crons.search, user, body)
    return page_response(page, next_offset)


@router.post("/runs/crons/count")
async def count_crons(body: crons.CronCount, user: LgUser, db: DatabaseDep) -> int:
    return await db.run(crons.count, user, body)


@router.get("/runs/crons/{cron_id}")
async def get_cron(cron_id: str, user: LgUser, db: DatabaseDep) -> JSONResponse:
    return json_response(await db.run(crons.get, user, cron_id))


@router.patch("/runs/crons/{cron_id}")
async def update_cron(cron_id: str, body: crons.CronPatch, request: Request, user: LgUser, db: DatabaseDep,
                      bus: BusDep) -> JSONResponse:
    request.state.audit_target = f"cron_id={cron_id}"
    return json_response(await crons.update(db, bus, user, cron_id, body))


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(cron_id: str, request: Request, user: LgUser, db: DatabaseDep, bus: BusDep) -> Response:
    request.state.audit_target = f"cron_id={cron_id}"
    await crons.delete(db, bus, user, cron_id)
    return Response(status_code=204)
