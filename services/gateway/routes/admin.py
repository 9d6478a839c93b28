"""Admin API (admins only): models, chain, pricing, prompts, MCP servers (`routes/mcp_servers.py`),
users, status, overview, audit."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from services.gateway.access import users as users_svc
from services.gateway.admin import models as models_svc
from services.gateway.admin import pricing as pricing_svc
from services.gateway.admin import prompts as prompts_svc
from services.gateway.admin.control_publisher import current_chain
from services.gateway.admin.status import status as status_view
from services.gateway.audit import AuditFilter, GuardrailFilter, list_audit, list_guardrail_events
from services.gateway.deps import AdminUser, DatabaseDep, SettingsDep, get_publisher
from services.gateway.fleet.stats import overview as overview_view
from services.gateway.pagination import Cursor, Limit, Page

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])
PromptName = Path(pattern=prompts_svc.NAME_PATTERN)


# ---- models and the chain -------------------------------------------------------------------


@router.get("/models", response_model=Page)
async def list_models(_: AdminUser, db: DatabaseDep, limit: Limit = 50, cursor: Cursor = None) -> Page:
    return await db.run(models_svc.list_page, limit, cursor)


@router.post("/models", status_code=201)
async def create_model(
    body: models_svc.ModelIn, request: Request, admin: AdminUser, db: DatabaseDep, settings: SettingsDep
) -> dict[str, Any]:
    out = await db.run(models_svc.create, body, settings.persistent_secret("secret_key"), admin.id)
    request.state.audit_target = f"model_id={out['id']}"
    await get_publisher(request).publish_chain()
    return out


@router.get("/models/chain")
async def get_chain(_: AdminUser, db: DatabaseDep) -> dict[str, Any]:
    chain = await db.run(current_chain)
    if chain is None:
        return {"revision": 0, "active": None, "fallbacks": []}
    # A cleared chain is published with an empty `active`: the built-in model answers.
    return {"revision": chain.revision, "active": chain.active or None, "fallbacks": chain.fallbacks}


@router.put("/models/chain")
async def put_chain(body: models_svc.ChainIn, request: Request, admin: AdminUser, db: DatabaseDep) -> dict[str, Any]:
    revision = await db.run(models_svc.set_chain, body, admin.id)
    request.state.audit_target = f"chain_revision={revision}"
    await get_publisher(request).publish_chain()  # publishes this revision or a newer one
    return {"revision": revision, "active": body.active, "fallbacks": body.fallbacks}  # active None: cleared


@router.get("/models/{model_id}")
async def get_model(model_id: str, _: AdminUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(models_svc.get, model_id)


@router.put("/models/{model_id}")
async def update_model(
    model_id: str,
    body: models_svc.ModelIn,
    request: Request,
    admin: AdminUser,
    db: DatabaseDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    out = await db.run(models_svc.update, model_id, body, settings.persistent_secret("secret_key"), admin.id)
    await get_publisher(request).publish_chain()
    return out


@router.delete("/models/{model_id}", status_code=204, response_class=Response)
async def delete_model(model_id: str, request: Request, admin: AdminUser, db: DatabaseDep) -> Response:
    await db.run(models_svc.delete, model_id, admin.id)
    await get_publisher(request).publish_chain()
    return Response(status_code=204)


# ---- pricing -----------------------------------------------------------------------------------


@router.get("/pricing")
async def get_pricing(_: AdminUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(pricing_svc.get)


@router.put("/pricing")
async def put_pricing(
    body: pricing_svc.PricingIn, request: Request, admin: AdminUser, db: DatabaseDep
) -> dict[str, Any]:
    await db.run(pricing_svc.put, body, admin.id)
    await get_publisher(request).publish_pricing()
    return await db.run(pricing_svc.get)


# ---- prompts -----------------------------------------------------------------------------------


@router.get("/prompts", response_model=Page)
async def list_prompts(_: AdminUser, db: DatabaseDep, limit: Limit = 50, cursor: Cursor = None) -> Page:
    return await db.run(prompts_svc.list_page, limit, cursor)


@router.get("/prompts/{name}")
async def get_prompt(_: AdminUser, db: DatabaseDep, name: str = PromptName) -> dict[str, Any]:
    return await db.run(prompts_svc.get, name)


@router.post("/prompts/{name}/versions", status_code=201)
async def add_prompt_version(
    body: prompts_svc.VersionIn, request: Request, admin: AdminUser, db: DatabaseDep, name: str = PromptName
) -> dict[str, Any]:
    out = await db.run(prompts_svc.add_version, name, body, admin.id)
    request.state.audit_target = f"prompt={name},version={out['version']}"
    return out


@router.post("/prompts/{name}/activate")
async def activate_prompt(
    body: prompts_svc.ActivateIn, request: Request, _: AdminUser, db: DatabaseDep, name: str = PromptName
) -> dict[str, Any]:
    await db.run(prompts_svc.activate, name, body)
    request.state.audit_target = f"prompt={name},version={body.version}"
    await get_publisher(request).publish_prompt(name)
    return await db.run(prompts_svc.get, name)


# ---- operations --------------------------------------------------------------------------------


@router.get("/status")
async def get_status(request: Request, _: AdminUser) -> dict[str, Any]:
    return await status_view(request.app)


@router.get("/overview")
async def get_overview(_: AdminUser, db: DatabaseDep) -> dict[str, Any]:
    return await db.run(overview_view)


# ---- users ------------------------------------------------------------------------------------


@router.get("/users", response_model=Page)
async def list_users(_: AdminUser, db: DatabaseDep, settings: SettingsDep, limit: Limit = 50,
                     cursor: Cursor = None) -> Page:
    return await db.run(users_svc.list_page, limit, cursor, settings.admin_users)


@router.get("/users/{user_id}")
async def get_user(user_id: str, _: AdminUser, db: DatabaseDep, settings: SettingsDep) -> dict[str, Any]:
    return await db.run(users_svc.admin_view, user_id, settings.admin_users)


Text = Annotated[str | None, Query(max_length=300, description="case-insensitive substring")]


@router.get("/audit", response_model=Page)
async def audit(
    _: AdminUser,
    db: DatabaseDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    user_id: Text = None,
    method: Annotated[Literal["POST", "PUT", "PATCH", "DELETE"] | None, Query()] = None,
    outcome: Annotated[Literal["ok", "denied", "rejected", "error"] | None, Query()] = None,
    route: Annotated[str | None, Query(max_length=300, description="substring of the route or target")] = None,
    q: Annotated[str | None, Query(max_length=300, description="substring of route, target, user, request id")] = None,
) -> Page:
    where = AuditFilter(user_id=user_id, method=method, outcome=outcome, route=route, q=q)
    return await db.run(list_audit, limit, cursor, where)


@router.get("/guardrail-events", response_model=Page)
async def guardrail_events(
    _: AdminUser,
    db: DatabaseDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    action: Annotated[Literal["block", "flag", "redact", "allow"] | None, Query()] = None,
    tier: Annotated[int | None, Query(ge=1, le=2)] = None,
    user_id: Text = None,
    q: Annotated[str | None, Query(max_length=300, description="substring of rule, reason, route, task id")] = None,
) -> Page:
    where = GuardrailFilter(action=action, tier=tier, user_id=user_id, q=q)
    return await db.run(list_guardrail_events, limit, cursor, where)

